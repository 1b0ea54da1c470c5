"""Criteria as reviewers paste them from Word, Excel or a web page: curly quotes, dashes,
Unicode spaces, zero-width characters, another Unicode normal form, ligatures, full-width
letters, the ellipsis. Such a variant links exactly as the criterion typed does: the same
tier, `hash_match` True, a tier reason naming the typography. The contract's
`criterion_hash` is still the hash of the text as typed, and a real edit still does not
link by hash.

The properties keep one store across their examples (a new vendor per example), so the
function-scoped fixtures they use are the store and the autouse environment guard."""

from __future__ import annotations

import difflib
import itertools
import re
import unicodedata
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.hashing import canonical_criterion_hash, criterion_hash, fold_typography
from core.models import FollowupHit, RetrievalTrace
from core.retrieval.tiers import question_similarity, typographic_differences
from core.workbench import Workbench
from tests.conftest import AES_CRITERION
from tests.support.payloads import response, round_payload
from tests.support.properties import store_examples
from tests.support.store import get_all

STRATEGIES = ("precedence", "tiered", "hash_extraction")
STORE_PROPERTY = settings(max_examples=store_examples(20), deadline=None, database=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                 HealthCheck.too_slow])
VENDOR_IDS = (f"pasted-{n}" for n in itertools.count(1))
REWORDED = "Which cipher protects stored customer information?"

# Words with the letter pairs ligatures replace (fi fl ff ffi ffl) and accents NFD splits.
WORDS = ("vendor", "encrypt", "data", "rest", "file", "office", "staff", "firewall",
         "workflow", "official", "baffle", "café", "naïve", "résumé", "policy", "keys",
         "backup", "audit", "logs", "review", "profile", "affiliate")
ZERO_WIDTH = {  # inserted character -> how the reason names it
    "\u200b": "zero-width space removed",
    "\u200c": "zero-width non-joiner removed",
    "\u200d": "zero-width joiner removed",
    "\u2060": "word joiner removed",
    "\ufeff": "zero-width no-break space removed",
    "\u00ad": "soft hyphen removed",
}
LIGATURES = {"ffi": "\ufb03", "ffl": "\ufb04", "ff": "\ufb00", "fi": "\ufb01", "fl": "\ufb02"}
APOSTROPHES = ("\u2019", "\u2018", "\u201b", "\u2032", "\u02bc")
DOUBLE_QUOTES = (("\u201c", "\u201d"), ("\u201e", "\u201c"), ("\u00ab", "\u00bb"),
                 ("\u2033", "\u2033"))
DASHES = ("\u2010", "\u2011", "\u2012", "\u2013", "\u2014", "\u2015", "\u2212")
SPACES = ("\u00a0", "\u202f", "\u2007", "\u2009", "\u3000")


# Criteria and their pasted variants --------------------------------------------------------

@st.composite
def criteria(draw) -> str:
    """A criterion as a reviewer types it: words, possessives, quoted words, hyphens."""
    word = st.sampled_from(WORDS)
    token = st.one_of(
        word,
        word.map(lambda w: f"{w}'s"),
        word.map(lambda w: f'"{w}"'),
        st.tuples(word, word).map(lambda pair: "-".join(pair)),
        st.just("AES-256"),
    )
    tokens = draw(st.lists(token, min_size=2, max_size=7))
    ending = draw(st.sampled_from(["?", "?", "..."]))  # a question mark twice as often
    return f"Does the {' '.join(tokens)}{ending}"


Transform = Callable[[st.DrawFn, str], tuple[str, list[str]]]


def each(draw: st.DrawFn, text: str, pattern: str, choices) -> tuple[str, list[str]]:
    """Replace every match of `pattern`, each by a drawn choice: (text, choices used)."""
    used: list[str] = []

    def swap(_match: re.Match) -> str:
        used.append(draw(st.sampled_from(choices)))
        return used[-1]

    return re.sub(pattern, swap, text), used


def curly_apostrophes(draw, text):
    return each(draw, text, "'", APOSTROPHES)


def curly_double_quotes(draw, text):
    opening, closing = draw(st.sampled_from(DOUBLE_QUOTES))
    text = re.sub(r'"([^"]*)"', lambda m: f"{opening}{m.group(1)}{closing}", text)
    return text, [opening, closing]


def dashes(draw, text):
    return each(draw, text, "-", DASHES)


def ellipsis(draw, text):
    return text.replace("...", "\u2026"), ["\u2026"]


def ligatures(draw, text):
    used = []
    for letters, ligature in LIGATURES.items():
        if letters in text and draw(st.booleans()):
            text = text.replace(letters, ligature)
            used.append(f"ligature {ligature} for {letters}")
    return text, used


def full_width(draw, text):
    positions = [i for i, c in enumerate(text) if c.isascii() and c.isalnum()]
    chosen = set(draw(st.lists(st.sampled_from(positions), min_size=1, max_size=8)))
    return "".join(chr(ord(c) + 0xFEE0) if i in chosen else c
                   for i, c in enumerate(text)), ["full-width characters"]


def nfd(draw, text):
    return unicodedata.normalize("NFD", text), ["Unicode NFD form"]


def unicode_spaces(draw, text):
    text, _used = each(draw, text, " ", (" ", *SPACES))
    return text, []  # white space already links by the exact hash: nothing to name


def zero_width(draw, text):
    inserted = st.tuples(st.integers(0, len(text)), st.sampled_from(tuple(ZERO_WIDTH)))
    inserts = draw(st.lists(inserted, min_size=1, max_size=4))
    for position, char in sorted(inserts, reverse=True):
        text = text[:position] + char + text[position:]
    return text, [ZERO_WIDTH[char] for _position, char in inserts]


# In this order: NFD after the letters it could split are in place, zero-width characters
# last so they may land anywhere, between an accent and its letter too.
TRANSFORMS: tuple[Transform, ...] = (curly_apostrophes, curly_double_quotes, dashes, ellipsis,
                                     ligatures, full_width, nfd, unicode_spaces, zero_width)


@st.composite
def pasted(draw, plain: str) -> tuple[str, list[str]]:
    """(the criterion after any subset of the transformations, the names the tier reason
    must hold for those that changed it)."""
    text, names = plain, []
    for transform in TRANSFORMS:
        if draw(st.booleans()):
            changed, used = transform(draw, text)
            if changed != text:
                names += used
            text = changed
    return text, names


# Helpers ----------------------------------------------------------------------------------

def round_of(vendor_id: str, criterion: str, question: str) -> dict:
    return round_payload(1, [response(question, "Yes, as our policy states.", criterion)],
                         vendor=vendor_id, timestamp="2024-03-01T09:00:00Z")


def only_followup(trace: RetrievalTrace) -> FollowupHit:
    [hit] = trace.followups
    return hit


def all_hits(trace: RetrievalTrace) -> list[FollowupHit]:
    return (list(trace.followups) + list(trace.hash_path or []) + list(trace.semantic_path or [])
            + [d.followup for d in trace.dropped_followups])


# Folding and the canonical hash ------------------------------------------------------------

@settings(max_examples=200, deadline=None, database=None)
@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127)))
def test_plain_ascii_is_folded_to_itself(text):
    assert fold_typography(text) == text


@settings(max_examples=200, deadline=None, database=None)
@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127)),
       st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127)))
def test_question_similarity_of_plain_ascii_is_seed_003s_ratio(criterion, question):
    expected = difflib.SequenceMatcher(None, criterion.lower(), question.lower()).ratio()
    assert question_similarity(criterion, question) == expected


@settings(max_examples=200, deadline=None, database=None)
@given(st.text(), st.data())
def test_the_same_criterion_hash_means_the_same_canonical_hash(text, data):
    """Any case and white-space change (Unicode spaces included) keeps both hashes."""
    words = ["".join(c.upper() if c.upper().lower() == c.lower() else c for c in word)
             for word in text.split()]
    gaps = [data.draw(st.sampled_from([" ", "  ", "\t", "\n", "\u00a0", "\u3000"]))
            for _ in words]
    respaced = "".join(g + w for g, w in zip(gaps, words, strict=True))
    assert criterion_hash(respaced) == criterion_hash(text)
    assert canonical_criterion_hash(respaced) == canonical_criterion_hash(text)


@given(criteria().flatmap(lambda plain: st.tuples(st.just(plain), pasted(plain))))
@settings(max_examples=200, deadline=None, database=None)
def test_a_pasted_variant_has_the_canonical_hash_and_its_differences_are_named(case):
    plain, (text, names) = case
    assert canonical_criterion_hash(text) == canonical_criterion_hash(plain)
    differences = typographic_differences(plain, text)
    assert differences == typographic_differences(text, plain)
    for name in names:
        assert any(name in label for label in differences), (name, differences)
    assert (differences == []) == (criterion_hash(text) == criterion_hash(plain))


@pytest.mark.parametrize("pasted_text, names", [
    ("Does the vendor\u2019s policy cover AES-256?", ["curly apostrophe \u2019 for '"]),
    ("Does the vendor's policy cover AES\u2013256?", ["en dash \u2013 for -"]),
    ("Does the vendor's \u201cpolicy\u201d cover AES-256?",
     ['left double quote \u201c for "', 'right double quote \u201d for "']),
    ("Does the vendor's po\u200blicy cover AES-256?", ["zero-width space removed"]),
    ("Does the vendor's pro\ufb01le cover AES-256?", ["ligature \ufb01 for fi"]),
    ("Does the vendor's ｐｏｌｉｃｙ cover AES-256?", ["full-width characters"]),
    ("Does the vendor's policy cover AES-256\u2026", ["ellipsis \u2026 for ..."]),
    (unicodedata.normalize("NFD", "Does the vendor's résumé cover AES-256?"),
     ["Unicode NFD form"]),
])
def test_each_variant_is_named(pasted_text, names):
    plain = fold_typography(unicodedata.normalize("NFC", pasted_text))
    assert plain.replace("\u00e9", "e").isascii()
    assert typographic_differences(plain, pasted_text) == names
    assert canonical_criterion_hash(pasted_text) == canonical_criterion_hash(plain)
    assert criterion_hash(pasted_text) != criterion_hash(plain)


def test_white_space_and_case_are_no_typographic_difference():
    assert typographic_differences(AES_CRITERION, AES_CRITERION.upper().replace(" ", "\u00a0")
                                   ) == []


@pytest.mark.parametrize("edited", [
    "Does the vendor encrypt data at rest using AES-128?",
    "Does the vendor encrypt all data at rest using AES-256?",
    "Does the vendor decrypt data at rest using AES-256?",
    "Does the vendor encrypt data at rest using AES256?",
])
def test_a_real_edit_has_another_canonical_hash(edited):
    assert canonical_criterion_hash(edited) != canonical_criterion_hash(AES_CRITERION)
    assert canonical_criterion_hash(edited.replace("-", "\u2013").replace(" ", "\u200b ")) \
        != canonical_criterion_hash(AES_CRITERION)


# Retrieval: a pasted criterion links exactly as the typed one ------------------------------

@STORE_PROPERTY
@given(data=st.data())
def test_a_pasted_criterion_links_exactly_as_the_criterion_typed(workbench: Workbench, data):
    plain = data.draw(criteria(), label="typed criterion")
    text, names = data.draw(pasted(plain), label="pasted criterion")
    question = data.draw(st.sampled_from([plain, text, REWORDED]), label="question")
    typed_vendor, pasted_vendor = next(VENDOR_IDS), next(VENDOR_IDS)
    workbench.ingest_questionnaire(round_of(typed_vendor, plain, question))
    workbench.ingest_questionnaire(round_of(pasted_vendor, text, question))
    exact_link = criterion_hash(text) == criterion_hash(plain)

    for strategy in STRATEGIES:
        reference = only_followup(workbench.retrieve(typed_vendor, plain, strategy))
        assert reference.hash_match and reference.typographic_variants == []
        # A pasted round, the criterion typed; a typed round, the criterion pasted.
        for vendor_id, criterion in ((pasted_vendor, plain), (typed_vendor, text)):
            trace = workbench.retrieve(vendor_id, criterion, strategy)
            assert trace.criterion_hash == criterion_hash(criterion)
            hit = only_followup(trace)
            assert hit.hash_match is True
            assert "hash" in hit.found_by
            assert hit.tier == reference.tier
            assert hit.question_similarity == reference.question_similarity
            if exact_link:
                assert hit.typographic_variants == []
                assert hit.tier_reason == reference.tier_reason
                continue
            assert hit.typographic_variants
            assert hit.tier_reason.startswith("hash match after typography (")
            assert hit.tier_reason.endswith(reference.tier_reason.removeprefix("hash match"))
            for name in names:
                assert name in hit.tier_reason, (name, hit.tier_reason)


@STORE_PROPERTY
@given(data=st.data())
def test_a_real_edit_pasted_or_typed_does_not_link_by_hash(workbench: Workbench, data):
    plain = data.draw(criteria(), label="criterion").replace("Does the ", "Does the AES-256 ")
    edit = data.draw(st.sampled_from([
        lambda t: t.replace("AES-256", "AES-128", 1),
        lambda t: t.replace("Does the ", "Does every ", 1),
        lambda t: t.replace("Does the ", "Does the backup ", 1),
    ]), label="edit")
    edited, _names = data.draw(pasted(edit(plain)), label="pasted edit")
    vendor_id = next(VENDOR_IDS)
    workbench.ingest_questionnaire(round_of(vendor_id, edited, plain))
    assert canonical_criterion_hash(edited) != canonical_criterion_hash(plain)
    for strategy in STRATEGIES:
        trace = workbench.retrieve(vendor_id, plain, strategy)
        for hit in all_hits(trace):
            assert hit.hash_match is False
            assert "hash" not in hit.found_by
            assert hit.typographic_variants == []
            assert not (hit.tier_reason or "").startswith("hash match")


# Single cases a reviewer meets ------------------------------------------------------------

PASTED_AES = "Does the vendor\u2019s platform encrypt data at rest using AES\u2011256?\u200b"
TYPED_AES = "Does the vendor's platform encrypt data at rest using AES-256?"


def test_the_reason_names_the_typography(workbench):
    workbench.ingest_questionnaire(round_of("acme", PASTED_AES, PASTED_AES))

    hit = only_followup(workbench.retrieve("acme", TYPED_AES))

    assert hit.typographic_variants == ["curly apostrophe \u2019 for '",
                                        "non-breaking hyphen \u2011 for -",
                                        "zero-width space removed"]
    assert hit.tier_reason == (
        "hash match after typography (curly apostrophe \u2019 for ', non-breaking hyphen "
        "\u2011 for -, zero-width space removed); question unchanged, similarity 1.00 >= "
        "0.70: high")
    assert hit.criterion_question_text == PASTED_AES
    assert hit.criterion_question_hash == criterion_hash(PASTED_AES) != criterion_hash(TYPED_AES)


def test_a_stored_followup_carries_the_canonical_hash_beside_the_contract_hash(workbench):
    workbench.ingest_questionnaire(round_of("acme", PASTED_AES, "Which cipher?"))
    [meta] = get_all(workbench.store.open_vendor("acme").chunks)["metadatas"]
    assert meta["criterion_question_hash"] == criterion_hash(PASTED_AES)
    assert meta["criterion_canonical_hash"] == canonical_criterion_hash(TYPED_AES)


def test_every_linked_followup_lists_the_pasted_rounds(workbench):
    workbench.ingest_questionnaire(round_of("acme", PASTED_AES, "Which cipher?"))
    second = round_of("acme", TYPED_AES, "Which key length?") | {"round_number": 2}
    workbench.ingest_questionnaire(second)
    workbench.ingest_questionnaire(round_of("acme", AES_CRITERION, "Other?")
                                   | {"round_number": 3})

    linked = workbench.linked_followups("acme", TYPED_AES)

    assert [h.round_number for h in linked] == [1, 2]
    assert [bool(h.typographic_variants) for h in linked] == [True, False]
    assert all(h.hash_match and h.tier for h in linked)


def test_asking_the_pasted_question_returns_the_typed_rounds_answer(workbench):
    workbench.ingest_questionnaire(round_of("acme", TYPED_AES, TYPED_AES))

    turn = workbench.ask("acme", PASTED_AES)

    [hit] = turn.followups
    assert hit.hash_match is True and hit.tier == "high"
    assert "zero-width space removed" in hit.tier_reason


def test_a_criterion_differing_only_in_punctuation_is_the_low_tier_not_a_hash_match(
        workbench):
    linked = TYPED_AES.rstrip("?")
    workbench.ingest_questionnaire(round_of("acme", linked, "Which cipher?"))

    hit = only_followup(workbench.retrieve("acme", TYPED_AES, "precedence"))

    assert hit.hash_match is False and hit.typographic_variants == []
    assert hit.tier == "low" and "near_copy" in hit.found_by
    assert hit.tier_reason.startswith(
        "no hash match, its criterion text differs only in punctuation;")
