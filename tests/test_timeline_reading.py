"""What a document states of itself, read from its text (core/timeline): dates as documents
write them, its kind, title, issuer and dates, and an auditor's opinion and matters.

The texts are built from the layout facts of real published files (where a report states its
period, how a certificate labels its dates, a policy's version table), never their content:
every name and sentence here is the project's own."""

from __future__ import annotations

from datetime import date

import pytest

from core.timeline.dates import find_dates, find_periods
from core.timeline.opinions import read_matters, read_opinion
from core.timeline.reading import read_facts


@pytest.mark.parametrize("text, expected", [
    ("throughout the period September 1, 2018, to August 31, 2019",
     (date(2018, 9, 1), date(2019, 8, 31))),
    ("SEPTEMBER 1, 2022, TO AUGUST 31, 2023", (date(2022, 9, 1), date(2023, 8, 31))),
    ("for the period from December 16, 2016, to December 15, 2017",
     (date(2016, 12, 16), date(2017, 12, 15))),
    ("For the Period April 1, 2023 to March 31, 2024", (date(2023, 4, 1), date(2024, 3, 31))),
    ("for the period January 1 - December 31, 2024", (date(2024, 1, 1), date(2024, 12, 31))),
    ("from 1 April 2024 to 31 March 2025", (date(2024, 4, 1), date(2025, 3, 31))),
    ("the period September 1,\n2024 through\nAugust 31, 2025",
     (date(2024, 9, 1), date(2025, 8, 31))),
    ("Examination period | 2022-10-01 to 2023-09-30", (date(2022, 10, 1), date(2023, 9, 30))),
])
def test_periods_are_read_however_they_are_written(text, expected):
    [period] = find_periods(text)
    assert (period.start, period.end) == expected


@pytest.mark.parametrize("text, expected", [
    ("as of September 9, 2015", date(2015, 9, 9)),
    ("valid until 2026-03-14", date(2026, 3, 14)),
    ("Date of Last Review: June 18, 2025", date(2025, 6, 18)),
    ("on September 3, 2025, in Utah", date(2025, 9, 3)),
    ("Dated 16th March, 2022", date(2022, 3, 16)),
    ("Issued 14.03.2023", date(2023, 3, 14)),
])
def test_single_dates_are_read_however_they_are_written(text, expected):
    assert [d.day for d in find_dates(text)] == [expected]


def test_a_document_keeps_one_convention_for_slashed_dates():
    # 14/03/2026 can only be day first, so 03/04/2026 in the same text is 3 April.
    days = [d.day for d in find_dates("Issued 03/04/2023. Expires 14/03/2026.")]
    assert days == [date(2023, 4, 3), date(2026, 3, 14)]
    assert [d.day for d in find_dates("Issued 03/04/2023.")] == [date(2023, 3, 4)]


def test_what_only_looks_like_a_date_is_not_one():
    assert find_dates("Version 2.10.2024 of the 31/02/2024 form, ISO 27001:2013") == []


SOC3_COVER = """System and Organization Controls 3 (SOC 3) Report

Report on the Example Cloud System
Relevant to Security and Availability

For the Period April 1, 2023 to March 31, 2024
"""
AUDITOR_PAGE = """Exampleton & Co LLP

Independent Service Auditor's Report

To the Management of Example Cloud, Inc.

Scope
We have examined management's assertion that Example Cloud's controls were effective
throughout the period April 1, 2023 to March 31, 2024, to provide reasonable assurance.

Our examination was not conducted for the purpose of evaluating the cybersecurity risk
management program. Accordingly, we do not express an opinion or any other form of assurance
on its cybersecurity risk management program.

Opinion
In our opinion, Example Cloud's controls over the system were effective throughout the period
April 1, 2023 to March 31, 2024, to provide reasonable assurance that its commitments were
achieved.

Exampleton & Co LLP
May 14, 2024
"""
ASSERTION_PAGE = """Management's Assertion

We confirm, except for the matters described below, that the controls over the System were
effective throughout the period April 1, 2023 to March 31, 2024.
"""


def test_a_soc_3_report_states_its_period_auditor_and_opinion():
    facts = read_facts([SOC3_COVER, AUDITOR_PAGE, ASSERTION_PAGE], source="soc3.pdf")
    assert facts.kind == "report"
    assert facts.family == "SOC 3"
    assert facts.title == "System and Organization Controls 3 (SOC 3) Report"
    assert (facts.period_start, facts.period_end) == ("2023-04-01", "2024-03-31")
    assert facts.issuer == "Exampleton & Co LLP"
    # Management's "except for" is not the auditor's opinion, and a clean report's limit
    # ("we do not express an opinion ... on its cybersecurity program") is no disclaimer.
    assert facts.opinion == "unmodified"
    assert facts.stated_date == ("2024-03-31", "period_end")


@pytest.mark.parametrize("opinion_text, expected", [
    ("Qualified Opinion\nIn our opinion, except for the effects of the matter described in the "
     "Basis for Qualified Opinion paragraph, the controls were effective in all material "
     "respects.", "qualified"),
    ("In our opinion, except for the matter described in the preceding paragraph, the "
     "description is fairly presented, in all material respects.", "qualified"),
    ("Adverse Opinion\nIn our opinion, because of the significance of the matter described, the "
     "controls were not suitably designed.", "adverse"),
    ("Because of the significance of the matter, we have not been able to obtain sufficient "
     "appropriate evidence to provide a basis for an opinion. Accordingly, we do not express "
     "an opinion on the description.", "disclaimer"),
    ("In our opinion, in all material respects, the description fairly presents the system.",
     "unmodified"),
    ("The controls are described in Section III.", None),
])
def test_the_opinion_is_read_from_the_auditors_words(opinion_text, expected):
    assert read_opinion(opinion_text) == expected


def test_matters_are_sentences_a_reviewer_can_read():
    page = """Section IV results
CC6.1 | Data is encrypted at rest. | Inspected settings. | No exceptions noted.
CC6.2 | Access is revoked within a day. | Inspected tickets. | Exceptions noted.

Appendix - Deviations Noted
Item 1 - CC6.2 Revocation of access
Deviation. For 2 of the 25 leavers sampled, access was removed after three days. Management
has since automated the step.

Emphasis of Matter
We draw attention to the description of the subservice organisation, which is carved out.
"""
    matters = read_matters(["cover page", page])
    assert matters == [
        "Emphasis of matter (page 2): We draw attention to the description of the subservice "
        "organisation, which is carved out.",
        "Exception in testing (page 2): CC6.2 Access is revoked within a day. Result: "
        "Exceptions noted.",
        "Exception in testing (page 2): CC6.2 Revocation of access: For 2 of the 25 leavers "
        "sampled, access was removed after three days.",
    ]


CERTIFICATE = """This certificate is not transferable and remains the property of Example
Certifiers B.V. Any promotion must adhere to the scope and nature of certification.

Page 1 of 4 Digital version

Certificate

Certificate number: 2099-001
Certified by Example Certifiers since: November 18, 2010

the Information Security Management System as defined and implemented by Example Cloud, Inc.
is compliant with the requirements as stated in the standard: ISO/IEC 27001:2022
Issue date of certificate: November 18, 2022
Re-issue date of certificate: May 16, 2024
Expiration date of certificate: October 31, 2025
Last certification cycle expiration date: November 30, 2022
"""


def test_a_certificate_states_its_issue_and_expiry_by_their_labels():
    facts = read_facts([CERTIFICATE, "The scope of this ISO/IEC 27001:2022 certification is "
                        "bounded by specified services of Example Cloud, Inc."],
                       source="iso.pdf")
    assert facts.kind == "certificate"
    assert facts.family == "ISO/IEC 27001"
    # The re-issue is the certificate's own date; the first certification and an earlier
    # cycle's expiry are not.
    assert (facts.as_of, facts.valid_until) == ("2024-05-16", "2025-10-31")
    assert facts.scope == "bounded by specified services of Example Cloud, Inc"


def test_a_certificate_without_labels_is_dated_by_its_dates():
    # A certificate whose labels are drawn as pictures: only the values are in its text.
    facts = read_facts(["Example Cloud EMEA\n2024-03-22\n2025-03-22\nThe Certificate certifies "
                        "that the organisation was assessed as meeting the Cyber Essentials "
                        "Plus profile."], source="ce-plus.pdf")
    assert facts.kind == "certificate"
    assert facts.family == "Cyber Essentials Plus"
    assert (facts.as_of, facts.valid_until) == ("2024-03-22", "2025-03-22")


POLICY = """# Example Cloud — Access Control Policy

| Field | Value |
|---|---|
| Version | 4.1 |
| Effective date | 2023-10-02 |

## Revision history

| Version | Date | Change |
|---|---|---|
| 4.0 | 2022-09-01 | Annual review |
| 4.1 | 2023-10-02 | MFA for all staff |

Date of Last Review: June 18, 2025
"""


def test_a_policy_states_its_version_effective_date_and_review():
    facts = read_facts([POLICY], source="access.md",
                       headings=["Example Cloud — Access Control Policy", "Revision history"])
    assert facts.kind == "policy"
    assert facts.title == "Example Cloud — Access Control Policy"
    assert facts.issuer == "the vendor"
    assert (facts.version, facts.effective_on, facts.reviewed_on) == (
        "4.1", "2023-10-02", "2025-06-18")


def test_a_bridge_letter_is_dated_and_covers_the_gap():
    letter = """March 3, 2025

Re: Bridge letter for the SOC 2 Type II report

Dear customer,
No material changes were made to our controls from October 1, 2024 through February 28, 2025.

Sincerely,
Example Cloud, Inc.
"""
    facts = read_facts([letter], source="bridge.pdf")
    assert facts.kind == "letter"
    assert facts.as_of == "2025-03-03"
    assert (facts.period_start, facts.period_end) == ("2024-10-01", "2025-02-28")


def test_a_document_that_states_no_date_has_none():
    facts = read_facts(["# Example Cloud — Key configuration evidence\n\nKeys are AES-256."],
                       source="kms.md", headings=["Example Cloud — Key configuration evidence"])
    assert facts.stated_date is None


def test_a_key_ceremony_report_is_dated_by_its_ceremony():
    report = """Independent Accountant's Report on the Key Generation Ceremony

We observed the key generation ceremony of Example Root Y2, held on September 3, 2025, in Utah,
and the controls over it."""
    facts = read_facts([report], source="ceremony.pdf")
    assert (facts.kind, facts.family, facts.as_of) == ("report", "key ceremony", "2025-09-03")


def test_a_revision_tables_newest_row_gives_the_version_even_with_a_placeholder_date():
    table = """# Certificate Policy and Certification Practice Statement

This combined Certificate Policy and Certification Practice Statement governs the roots.

| Date | Changes | Version |
|---|---|---|
| May 16, 2023 | Make the OID optional. | 5.1 |
| Aug 29, 2025 | Shorter validity. | 5.9 |
| Sep TKTK, 2025 | Drop the old root. | 6.0 |
"""
    facts = read_facts([table], source="cp-cps.md",
                       headings=["Certificate Policy and Certification Practice Statement"])
    # Its version is the newest row's; that row's date is a placeholder, so none is stated.
    assert (facts.kind, facts.version, facts.reviewed_on) == ("policy", "6.0", None)


def test_a_report_dated_by_no_full_date_is_dated_to_its_month():
    facts = read_facts(["Pentest-Report Example VPN Clients 09.2018\n\nCarried out in "
                        "September 2018 by Example Security GmbH."], source="pentest.pdf")
    assert (facts.kind, facts.family, facts.as_of) == ("report", "penetration test",
                                                       "2018-09-01")
