"""The words the benchmark corpus is made of: control domains as a vendor's policies state
them, the criteria a reviewer asks, and the reworded follow-up questions a reviewer sends
when the first answer left a criterion open.

Each domain's policy sentences use the same vocabulary as its criteria, so that the longer
the vendor's documents, the more chunks look like the criterion; the follow-up questions
are reworded on purpose, and most answers are a word or two, as real ones are."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CriterionTemplate:
    """A criterion as `Does the vendor ...?`, and follow-up questions that reword it."""

    text: str
    rewordings: tuple[str, ...]


@dataclass(frozen=True)
class Domain:
    """One control area: its policy sentences and the criteria asked about it."""

    slug: str
    title: str
    sentences: tuple[str, ...]
    criteria: tuple[CriterionTemplate, ...]


# Scopes narrow a criterion ("... for backup media?"); each scoped criterion has its own hash.
SCOPES = (
    "", "for production systems", "for customer data", "for backup media",
    "for the EU hosting region", "for corporate endpoints", "for third-party integrations",
    "for the analytics platform",
)

FILLERS = {
    "role": ("the Chief Information Security Officer", "the IT Operations Manager",
             "the Security Engineering team", "each system owner", "the Risk Committee",
             "the Platform Reliability lead", "the Compliance Manager", "the Data Protection "
             "Officer"),
    "freq": ("annually", "quarterly", "monthly", "every 90 days", "semi-annually",
             "after every major release", "weekly"),
    "system": ("the production environment", "the customer database cluster",
               "the billing platform", "the data warehouse", "corporate laptops",
               "the CI/CD pipeline", "the object storage tier", "the identity provider",
               "the support ticketing system", "the message queue cluster"),
    "standard": ("ISO/IEC 27001 Annex A", "the SOC 2 Trust Services Criteria",
                 "NIST SP 800-53", "the CIS Benchmarks", "PCI DSS v4.0", "NIST CSF 2.0"),
    "policy": ("the Information Security Policy", "the Acceptable Use Standard",
               "the Data Classification Standard", "the Cryptography Standard",
               "the Access Control Policy", "the Operations Security Procedure",
               "the Business Continuity Plan"),
    "tool": ("the central SIEM", "the ticketing workflow", "the configuration management "
             "database", "the GRC platform", "the vulnerability scanner",
             "the endpoint management console"),
    "days": ("7", "14", "30", "45", "60", "90"),
    "months": ("6", "12", "13", "18", "24", "36"),
}

DOMAINS: tuple[Domain, ...] = (
    Domain(
        "encryption_at_rest", "Encryption at rest",
        (
            "Customer data at rest is encrypted using AES-256 in {system}.",
            "Encryption keys for data at rest are generated and stored in a hardware "
            "security module and rotated {freq}.",
            "Database volumes, snapshots and replicas inherit the encryption setting of "
            "the primary volume and cannot be created unencrypted.",
            "{role} approves every exception to {policy} that concerns stored data and "
            "records it in {tool}.",
            "Key usage is logged and the logs are reviewed {freq} for access outside the "
            "approved services.",
            "Legacy storage that cannot use AES-256 is listed with its migration date and "
            "compensating controls.",
        ),
        (
            CriterionTemplate("Does the vendor encrypt data at rest using AES-256",
                              ("Which cipher protects stored records on disk",
                               "What protects archived information when it is not in use")),
            CriterionTemplate("Does the vendor rotate encryption keys at least annually",
                              ("How often are the master secrets replaced",
                               "When was the last key changeover")),
        ),
    ),
    Domain(
        "encryption_in_transit", "Encryption in transit",
        (
            "All external connections to {system} require TLS 1.2 or higher with "
            "forward-secret cipher suites.",
            "Internal service-to-service traffic is encrypted with mutual TLS issued by "
            "the internal certificate authority.",
            "Certificates are inventoried in {tool} and renewed at least {days} days before "
            "expiry.",
            "Weak protocols such as SSL 3.0, TLS 1.0 and TLS 1.1 are disabled at the load "
            "balancer and verified {freq} by an external scan.",
            "{role} reviews the cipher configuration against {standard} {freq}.",
        ),
        (
            CriterionTemplate("Does the vendor encrypt data in transit using TLS 1.2 or higher",
                              ("Are old handshake versions switched off at the edge",
                               "What protects traffic between the browser and your servers")),
            CriterionTemplate("Does the vendor use mutual TLS between internal services",
                              ("How do back-end components authenticate each other",
                               "Is east-west traffic authenticated in both directions")),
        ),
    ),
    Domain(
        "mfa", "Authentication",
        (
            "Multi-factor authentication is enforced for all administrative access to "
            "{system}.",
            "Administrators authenticate through the identity provider with a phishing-"
            "resistant hardware key as the second factor.",
            "Shared administrative accounts are prohibited; break-glass accounts are sealed, "
            "monitored and reviewed {freq} by {role}.",
            "Authentication events are forwarded to {tool} and failed multi-factor attempts "
            "raise an alert.",
            "Password requirements follow {standard}, with a minimum length of 14 characters "
            "and screening against breached password lists.",
        ),
        (
            CriterionTemplate("Does the vendor enforce multi-factor authentication for all "
                              "administrative access",
                              ("Do privileged logins need a second proof of identity",
                               "Can an admin sign in with a password alone")),
            CriterionTemplate("Does the vendor prohibit shared administrative accounts",
                              ("Is every privileged identity tied to one named person",
                               "Who uses the emergency login and how is it sealed")),
        ),
    ),
    Domain(
        "access_review", "Access reviews",
        (
            "User access rights to {system} are reviewed at least quarterly by {role}.",
            "Access reviews compare the entitlements in the identity provider with the "
            "approved role matrix and are recorded in {tool}.",
            "Access of leavers is revoked within one business day of the termination date "
            "recorded by Human Resources.",
            "Privileged entitlements are re-approved {freq} and removed when the approval "
            "lapses.",
            "Exceptions found in an access review are remediated within {days} days and "
            "tracked to closure.",
        ),
        (
            CriterionTemplate("Does the vendor review user access rights at least quarterly",
                              ("How frequently are entitlements re-certified",
                               "When did managers last confirm who may log in")),
            CriterionTemplate("Does the vendor revoke access for leavers within one business day",
                              ("How fast is a departing employee locked out",
                               "What happens to accounts on someone's last day")),
        ),
    ),
    Domain(
        "logging", "Logging and monitoring",
        (
            "Audit logs from {system} are retained for at least {months} months in "
            "write-once storage.",
            "Security events are correlated in {tool} and triaged by the on-call analyst "
            "around the clock.",
            "Log integrity is protected by hashing each daily archive and storing the digest "
            "separately.",
            "{role} reviews the alerting rules {freq} against {standard}.",
            "Clock synchronisation uses authenticated NTP so that events from every source "
            "can be ordered.",
        ),
        (
            CriterionTemplate("Does the vendor retain audit logs for at least 12 months",
                              ("How long are the activity trails kept",
                               "Could you still show who changed a record last spring")),
            CriterionTemplate("Does the vendor monitor security events around the clock",
                              ("Is somebody watching the alerts at night",
                               "Who answers a detection at 3 am on a Sunday")),
        ),
    ),
    Domain(
        "pentest", "Penetration testing",
        (
            "An independent firm performs a penetration test of {system} at least annually.",
            "Penetration test findings rated critical or high are remediated within {days} "
            "days and retested by the same firm.",
            "The scope of each penetration test covers the external perimeter, the "
            "customer-facing application and the administrative interfaces.",
            "{role} accepts the penetration test report and presents open findings to the "
            "Risk Committee {freq}.",
            "An executive summary of the latest penetration test is available to customers "
            "under a non-disclosure agreement.",
        ),
        (
            CriterionTemplate("Does the vendor perform annual penetration testing",
                              ("When did outside testers last try to break in",
                               "Who attacks the product on your behalf, and how often")),
            CriterionTemplate("Does the vendor retest penetration test findings after "
                              "remediation",
                              ("Are fixed issues checked again by the testers",
                               "How do you know a reported hole is really closed")),
        ),
    ),
    Domain(
        "incident_response", "Incident response",
        (
            "A documented incident response plan defines severity levels, roles and "
            "escalation paths for {system}.",
            "The incident response plan is tested at least annually with a tabletop "
            "exercise led by {role}.",
            "Customers are notified of a confirmed security incident affecting their data "
            "within 72 hours.",
            "Post-incident reviews record root cause and corrective actions in {tool}.",
            "The incident response plan is reviewed {freq} and after every major incident.",
        ),
        (
            CriterionTemplate("Does the vendor have a documented incident response plan "
                              "tested at least annually",
                              ("When was the last breach drill",
                               "What playbook do staff follow when something goes wrong")),
            CriterionTemplate("Does the vendor notify customers of security incidents within "
                              "72 hours",
                              ("How soon would we hear about a compromise",
                               "What is the deadline to tell clients about a breach")),
        ),
    ),
    Domain(
        "backup", "Backup and recovery",
        (
            "Customer data in {system} is backed up daily to a separate region.",
            "Restoration from backup is tested at least annually and the results are "
            "reported to {role}.",
            "Backups are encrypted and stored with immutability for {days} days.",
            "Recovery time and recovery point objectives are defined in {policy} and "
            "validated {freq}.",
            "Backup job failures raise a ticket in {tool} and are resolved within one "
            "business day.",
        ),
        (
            CriterionTemplate("Does the vendor back up customer data and test restoration at "
                              "least annually",
                              ("When did you last bring a copy back to life",
                               "Have you proven you can recover from the saved copies")),
            CriterionTemplate("Does the vendor keep backups immutable",
                              ("Could ransomware delete the saved copies",
                               "Can an administrator alter an archived snapshot")),
        ),
    ),
    Domain(
        "vulnerability", "Vulnerability management",
        (
            "Critical vulnerabilities in {system} are remediated within {days} days of "
            "discovery.",
            "Authenticated vulnerability scans run {freq} with {tool} across servers, "
            "containers and images.",
            "Vulnerability remediation times are reported to {role} each month.",
            "Exceptions to remediation deadlines require a documented risk acceptance with "
            "an expiry date.",
            "Third-party libraries are scanned on every build in the CI/CD pipeline and "
            "builds with critical findings are blocked.",
        ),
        (
            CriterionTemplate("Does the vendor remediate critical vulnerabilities within 30 days",
                              ("How quickly are severe flaws patched",
                               "What is the deadline for fixing the worst scanner findings")),
            CriterionTemplate("Does the vendor scan for vulnerabilities at least monthly",
                              ("How often does the scanner run",
                               "When was the estate last checked for missing patches")),
        ),
    ),
    Domain(
        "training", "Security awareness",
        (
            "All employees complete security awareness training at onboarding and at least "
            "annually.",
            "Phishing simulations are run {freq} and repeat clickers receive targeted "
            "training.",
            "Completion of security awareness training is tracked by {role} and reported to "
            "management.",
            "Engineers complete secure development training covering the OWASP Top 10 "
            "{freq}.",
            "Training content is refreshed {freq} to reflect current threats and {policy}.",
        ),
        (
            CriterionTemplate("Does the vendor require security awareness training for all "
                              "employees at least annually",
                              ("Do staff take a yearly course on safe behaviour",
                               "What share of personnel finished the mandatory module")),
            CriterionTemplate("Does the vendor run phishing simulations",
                              ("Do you send fake lure emails to staff",
                               "How do you test whether people click bait messages")),
        ),
    ),
    Domain(
        "subprocessors", "Third-party risk",
        (
            "Subprocessors are assessed for security before onboarding and annually "
            "thereafter.",
            "The subprocessor list is published and customers are notified {days} days "
            "before a new subprocessor is engaged.",
            "Contracts with subprocessors include data protection terms, audit rights and "
            "breach notification duties.",
            "{role} reviews the SOC 2 reports of critical subprocessors {freq}.",
            "Subprocessor risk ratings are recorded in {tool} and drive the depth of each "
            "review.",
        ),
        (
            CriterionTemplate("Does the vendor assess the security of its subprocessors before "
                              "onboarding and annually thereafter",
                              ("How are suppliers vetted",
                               "Who checks the outside companies that handle our records")),
            CriterionTemplate("Does the vendor notify customers before engaging a new "
                              "subprocessor",
                              ("Would we be told about a new supplier in advance",
                               "How much warning is given when an outside party is added")),
        ),
    ),
    Domain(
        "change_management", "Change management",
        (
            "Changes to {system} are peer reviewed and approved before deployment.",
            "Production deployments run only through the CI/CD pipeline; direct changes to "
            "production are blocked.",
            "Emergency changes are reviewed retrospectively by {role} within {days} days.",
            "Segregation of duties prevents an engineer from approving their own change.",
            "Change records in {tool} link the ticket, the review and the deployment.",
        ),
        (
            CriterionTemplate("Does the vendor require peer review and approval for production "
                              "changes",
                              ("Can one engineer ship code nobody else looked at",
                               "Who signs off before a release goes live")),
            CriterionTemplate("Does the vendor block direct changes to production",
                              ("Can anyone edit live servers by hand",
                               "Is there a path to production outside the pipeline")),
        ),
    ),
    Domain(
        "business_continuity", "Business continuity",
        (
            "The Business Continuity Plan covers the loss of a region, a key supplier and "
            "key personnel.",
            "Disaster recovery for {system} is tested at least annually with a failover to "
            "the secondary region.",
            "Recovery time objectives of 4 hours and recovery point objectives of 1 hour "
            "apply to customer-facing services.",
            "{role} owns the continuity plan and reviews it {freq}.",
            "Lessons from each continuity test are tracked in {tool} until closed.",
        ),
        (
            CriterionTemplate("Does the vendor test disaster recovery at least annually",
                              ("Have you actually failed over to the second site",
                               "When did the team last rehearse losing a data centre")),
            CriterionTemplate("Does the vendor define recovery time objectives for "
                              "customer-facing services",
                              ("How long may the service stay down after a disaster",
                               "What outage duration have you committed to")),
        ),
    ),
    Domain(
        "data_retention", "Data retention and deletion",
        (
            "Customer data is deleted within {days} days of contract termination, including "
            "from {system}.",
            "Backups containing deleted customer data expire according to the retention "
            "schedule in {policy}.",
            "Deletion requests are logged in {tool} and confirmed to the customer in "
            "writing.",
            "{role} reviews the retention schedule {freq} against legal requirements.",
            "Media that held customer data is wiped or destroyed following NIST SP 800-88.",
        ),
        (
            CriterionTemplate("Does the vendor delete customer data within 30 days of contract "
                              "termination",
                              ("What happens to our records when we leave",
                               "How long do you hold information after the contract ends")),
            CriterionTemplate("Does the vendor securely destroy media that held customer data",
                              ("How are old disks disposed of",
                               "Who shreds retired drives")),
        ),
    ),
    Domain(
        "secure_development", "Secure development",
        (
            "Code for {system} is scanned with static analysis on every merge request.",
            "Secrets are kept out of source code by pre-commit scanning and a managed vault.",
            "Threat models are produced for new features that process customer data and "
            "reviewed by {role}.",
            "Dependencies are pinned and updated {freq}; end-of-life components are "
            "replaced.",
            "Security requirements from {standard} are part of the definition of done.",
        ),
        (
            CriterionTemplate("Does the vendor scan code with static analysis before release",
                              ("Are merge requests checked by automated code review tools",
                               "What catches injection bugs before they ship")),
            CriterionTemplate("Does the vendor keep secrets out of source code",
                              ("Where do passwords for services live",
                               "Could a credential end up in the repository")),
        ),
    ),
    Domain(
        "physical_security", "Physical and environmental security",
        (
            "Data centres hosting {system} hold ISO/IEC 27001 and SOC 2 attestations.",
            "Physical access to server rooms requires a badge and a biometric check and is "
            "logged.",
            "Visitors are escorted at all times and their visits recorded in {tool}.",
            "{role} reviews the data centre attestation reports {freq}.",
            "Environmental controls include fire suppression, redundant power and climate "
            "monitoring.",
        ),
        (
            CriterionTemplate("Does the vendor restrict physical access to data centres",
                              ("Who can walk into the server halls",
                               "How are the buildings with your hardware guarded")),
            CriterionTemplate("Does the vendor use data centres with SOC 2 attestations",
                              ("Are the hosting facilities independently audited",
                               "What reports cover the colocation sites")),
        ),
    ),
)

TERSE_ANSWERS = (
    "Yes.", "Confirmed.", "Yes, since 2023.", "Partially.", "No; planned for Q3.", "In place.",
    "Done.", "Yes, all tiers.", "See the attached evidence.", "Not yet.", "Correct.",
    "Yes, verified in the last audit.", "Completed in March.", "Only for production.",
)

LONG_ANSWERS = (
    "After the last round we completed the remaining work; the control now covers every "
    "environment and the evidence was reviewed by our auditors.",
    "We need to correct an earlier answer: the control applied to new systems only. The "
    "legacy systems were brought in scope last quarter.",
    "The control is in place and owned by the security team; the most recent review found "
    "no exceptions.",
)

AD_HOC_QUESTIONS = (
    "Who is the named contact for this assessment",
    "Please confirm the legal entity that signs the contract",
    "Which office handles support escalations",
    "What is the renewal date of the current agreement",
    "Can you share the organisation chart of the security team",
)

# The NIST SP 800-53 control each domain's criteria are mapped to, in the order of the
# domain's criteria: every scope of a criterion is mapped to its control, and the control
# matrix answers the controls by these ids.
DOMAIN_CONTROLS: dict[str, tuple[str, ...]] = {
    "encryption_at_rest": ("SC-28", "SC-12"),
    "encryption_in_transit": ("SC-8", "IA-9"),
    "mfa": ("IA-2(1)", "AC-2(9)"),
    "access_review": ("AC-6(7)", "PS-4"),
    "logging": ("AU-11", "SI-4"),
    "pentest": ("CA-8", "CA-5"),
    "incident_response": ("IR-8", "IR-6"),
    "backup": ("CP-9(1)", "CP-9"),
    "vulnerability": ("SI-2", "RA-5"),
    "training": ("AT-2", "AT-2(1)"),
    "subprocessors": ("SR-6", "SR-8"),
    "change_management": ("CM-3", "CM-5"),
    "business_continuity": ("CP-4", "CP-2"),
    "data_retention": ("SI-12(3)", "MP-6"),
    "secure_development": ("SA-11(1)", "IA-5(7)"),
    "physical_security": ("PE-3", "SA-9"),
}

# How a vendor's control matrix states a control's implementation.
CONTROL_ANSWERS = (
    "Implemented.", "Implemented by the vendor for all customer environments.",
    "Partially implemented; the remaining systems are scheduled for next quarter.",
    "Inherited from the hosting provider.", "Shared: the customer configures its part.",
    "Implemented and tested in the last assessment.", "Planned.",
)

# The kinds of a vendor's own documents and the word their titles end with: each reads as a
# policy of its own (none states a date or a version, so none is another's version).
DOCUMENT_KINDS = (
    ("policy", "Policy"), ("standard", "Standard"), ("procedure", "Procedure"),
    ("guidelines", "Guidelines"), ("program_overview", "Program Overview"),
)
# What a document's title calls its domain where the domain's own title names a kind of
# attestation ("Penetration testing Policy" would be read as a test report).
DOCUMENT_SUBJECTS = {"pentest": "Security Testing"}
# The document control lines under a policy's title. With the title they are the first six
# short lines of the document, where its reading looks for what the document is: no line of
# a later section stands among them.
DOCUMENT_CONTROL = (
    "Document owner: {role}", "Classification: Internal",
    "Applies to: {system} and the teams that run it", "Approval: the Risk Committee",
    "Status: in force",
)

# The documents the vendor sends in versions: an auditor's report each year, a policy in
# numbered versions, a certificate issued again when the last one ran out.
AUDITOR = "Northgate Assurance LLP"
CERTIFICATION_BODY = "Northgate Certification Services Ltd"
REPORT_YEARS = (2023, 2024, 2025)
POLICY_VERSIONS = (("3", "March 1, 2023"), ("4", "March 1, 2025"))
POLICY_OWNER = "the Chief Information Security Officer"
# How a new version of the policy says it changed a section ({{...}} a filler).
POLICY_CHANGE = "Changed in version {version}: the requirement now also covers {{system}}."
# (the standard's edition, issued, valid until, certificate number)
CERTIFICATES = (
    ("2013", "March 14, 2022", "March 13, 2025", "BV-ISMS-0417"),
    ("2022", "March 14, 2025", "March 13, 2028", "BV-ISMS-0982"),
)

REPORT_OPENING = (
    "To the Management of Benchmark Vendor: we have examined the description of the "
    "controls that operate the platform and the suitability of their design and operating "
    "effectiveness.",
    "Management is responsible for the description, for identifying the risks that threaten "
    "its service commitments, and for designing and operating effective controls.",
    "Our examination was conducted in accordance with attestation standards established by "
    "the AICPA and included tests of the operating effectiveness of the controls.",
    "In our opinion, in all material respects, the controls stated in the description "
    "operated effectively throughout the period under examination.",
    "Complementary user entity controls are listed in section 5 and are the customer's to "
    "operate.",
)
REPORT_TESTS = (
    "The service auditor inspected a sample of records in {tool} and observed the control "
    "in operation; no exceptions noted.",
    "The service auditor inquired of {role} and inspected the evidence retained for the "
    "period; no exceptions noted.",
    "The service auditor reperformed the control for a sample of {system}; no exceptions "
    "noted.",
)
POLICY_OPENING = (
    "Purpose. This policy states the security requirements that every team of Benchmark "
    "Vendor follows and the standards that detail them.",
    "Each requirement below names the standard or procedure that details it and the role "
    "that owns it.",
    "It applies to every employee and contractor and to every system that stores or "
    "processes customer data.",
    "Exceptions are requested from {role} and recorded in {tool} with an expiry date.",
    "Breaches of this policy are handled under the disciplinary procedure.",
    "The policy is reviewed {freq} by {role} and approved by the Risk Committee.",
)
