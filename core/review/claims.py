"""What a text states that another may contradict, read without a language model: an
answer's leading yes or no, and the claims of each clause not negated (periods and numbers
with what they are about and whether they are bounds, algorithms, key lengths, the lowest
protocol version), with when two claims agree. `contradictions` compares them across rounds
and with documents; the rules in full are in docs/review.md."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

from core.hashing import fold_typography

# The kinds of contradiction: every kind of claim, and yes_no (an answer's first word).
ContradictionKind = Literal["yes_no", "number", "period", "algorithm", "key_length",
                            "protocol_version"]
# Two periods within this share of the longer one are the same period ("every 90 days" and
# "quarterly", "52 weeks" and "a year").
PERIOD_TOLERANCE = 0.05


# Reading a text ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Claim:
    """One thing a text states that another text may contradict."""

    kind: ContradictionKind
    slot: tuple[object, ...]  # what two claims must share to be compared
    value: float  # a period in days, a number, a key length, a protocol version's rank
    shown: str  # as the sentence names it
    record_id: str
    topic: str = ""  # what the figure is about, for the sentence ("key rotation")
    sense: str = "exact"  # a figure stated as it is, or as a bound ("min", "max")
    explicit: bool = False  # a protocol version stated as a minimum
    names: frozenset[str] = frozenset()  # the algorithms a name may be ("SHA-2": four)
    clause: str = ""  # the clause that states it, as `_clauses` reads it


def folded(text: str) -> str:
    """The text lower-case, its typography folded."""
    return fold_typography(text).lower()


_CLAUSE_BREAK = re.compile(r"[;\n\r]+|(?<=[.!?])\s+|\s+(?:but|whereas|however)\b")
_BOUND_WORDING = re.compile(
    r"\b(?:no|not) (?:later|more|less|fewer|longer|sooner) than\b")
_NEGATION = re.compile(
    r"\b(?:not|no|never|none|nor|without|cannot|\w+n't|disabled?|disabling|deprecated?|"
    r"deprecating|switched off|turned off|reject(?:s|ed)?|refuse[sd]?|block(?:s|ed)?|"
    r"removed?|retired?|prohibit(?:s|ed)?|forbid(?:s|den)?|banned|unsupported|"
    r"disallow(?:s|ed)?|phas(?:ed|ing) out|instead|replac(?:e|es|ed|ing)|migrat\w*|"
    r"moved away|upgrad\w*|formerly|previously|used to|weak|insecure|except|until|before)\b")


# A move to something, and the words that say it is done ("Migration to AES-256 completed")
# or not yet ("a migration to AES-256 is under way").
_MOVE_TO = re.compile(r"\b(?:migrat\w*|upgrad\w*|moved|switched)\b[^,;]*?\bto\s+(?P<target>[^,;]+)")
_DONE = re.compile(r"\b(?:complet\w*|finish\w*|done|now)\b")
_NOT_YET = re.compile(r"\b(?:planned|plans?|will|under ?way|in progress|scheduled|underway|"
                      r"ongoing|expected|by)\b")


def _clauses(text: str) -> list[tuple[str, bool]]:
    """The text's clauses, lower-case with typography folded, each with whether it negates
    or retires what it names. The target of a move the clause says is done ("migration to
    AES-256 completed") is a clause of its own that names what is in use."""
    clauses = []
    for raw in _CLAUSE_BREAK.split(folded(text)):
        clause = " ".join(raw.split())
        if clause:
            negated = _NEGATION.search(_BOUND_WORDING.sub(" ", clause)) is not None
            clauses.append((clause, negated))
            moved = _MOVE_TO.search(clause) if negated else None
            if (moved is not None and _DONE.search(clause)
                    and not _NOT_YET.search(clause)):
                clauses.append((moved.group("target"), False))
    return clauses


# Yes or no --------------------------------------------------------------------------------

_LEADING_TOKEN = re.compile(r"[^a-z0-9]*(not applicable|n/a|n\.a\.?|yes|true|false|no|na|y|n)")
_MEANING = {"yes": "yes", "y": "yes", "true": "yes", "no": "no", "n": "no", "false": "no"}
# A token that begins ordinary sentences too ("No data is kept"): read only when punctuation
# or the end follows it.
_STRICT_TOKENS = {"no", "n", "y", "false", "na"}
_UNANSWERED = re.compile(r"\s*(?:/|or\b)\s*(?:yes|no|y|n)\b")


def leading_yes_no(answer: str) -> str | None:
    """"yes", "no" or "n/a" when the answer begins with one (Yes, Y, True; No, N, False; Not
    applicable, N/A, NA), whatever its typography, case and punctuation; None otherwise."""
    text = folded(answer).strip()
    match = _LEADING_TOKEN.match(text)
    if match is None:
        return None
    token, rest = match.group(1), text[match.end():]
    if rest[:1].isalnum() or _UNANSWERED.match(rest):
        return None
    following = rest.split("\n", 1)[0].lstrip()[:1]  # an explanation may follow on its own line
    if token in _STRICT_TOKENS and following.isalnum():
        return None
    return _MEANING.get(token, "n/a")


# Subjects of a figure ---------------------------------------------------------------------

# (the thing, what names it) and (the activity, what names it): what a figure is about.
_OBJECTS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (label, re.compile(pattern)) for label, pattern in (
        ("key", r"\bkeys?\b|\bkms\b"),
        ("password", r"\bpass(?:word|phrase)s?\b"),
        ("log", r"\blog(?:s|ging|ged)?\b|\baudit trails?\b"),
        ("certificate", r"\bcertificates?\b|\bcerts?\b"),
        ("secret", r"\bsecrets?\b|\btokens?\b|\bcredentials?\b"),
        ("access", r"\baccess\b|\bpermissions?\b|\bprivileges?\b|\bentitlements?\b"),
        ("backup", r"\bback(?:ups?| up|ed up)\b|\bsnapshots?\b"),
        ("vulnerability", r"\bvulnerabilit(?:y|ies)\b|\bfindings?\b|\bcves?\b|"
                          r"\bpatch(?:es|ing|ed)?\b"),
        ("penetration", r"\bpen(?:etration)?[ -]?test"),
        ("incident", r"\bincidents?\b|\bbreach(?:es)?\b"),
        ("session", r"\bsessions?\b"),
        ("subprocessor", r"\bsub-?processors?\b|\bsuppliers?\b|\bthird[- ]part(?:y|ies)\b"),
        ("business continuity", r"\bcontinuity\b|\bdisaster recovery\b|\bfailover\b"),
        ("availability", r"\buptime\b|\bavailab\w*|\bsla\b"),
    ))
_ACTIVITIES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (label, re.compile(pattern)) for label, pattern in (
        ("rotation", r"\brotat\w*|\bre-?key\w*"),
        ("review", r"\breview\w*|\bre-?certif\w*|\battest\w*"),
        ("testing", r"\btest\w*|\bexercis\w*|\btabletop\b|\bdrills?\b"),
        ("retention", r"\bretain\w*|\bretention\b|\bkept\b|\bkeep\w*|\barchiv\w*|"
                      r"\bpurg\w*|\bdelet\w*"),
        ("remediation", r"\bremediat\w*|\bfix\w*|\bresolv\w*"),
        ("restore", r"\brestor\w*|\brecover\w*"),
        ("scanning", r"\bscan\w*"),
        ("renewal", r"\brenew\w*|\bexpir\w*"),
        ("notification", r"\bnotif\w*"),
        ("timeout", r"\btime-?outs?\b|\bidle\b|\binactiv\w*"),
        ("lockout", r"\block(?:s|ed)? out\b|\blockouts?\b|\blocked\b"),
        ("training", r"\btrain(?:ing|ed)?\b|\bawareness\b"),
    ))


@lru_cache(maxsize=1024)
def _named(text: str) -> frozenset[str]:
    """The things and activities a text names."""
    return frozenset(label for label, pattern in (*_OBJECTS, *_ACTIVITIES)
                     if pattern.search(text))


def _topic(*texts: str) -> tuple[tuple[str, ...], str]:
    """What a figure in these texts is about, and how a sentence says it ("key rotation");
    nothing unless they name an activity (rotation, review, retention...), since a thing alone
    ("keys", "access") says too little of what the figure measures."""
    named = frozenset().union(*map(_named, texts))
    objects = [label for label, _pattern in _OBJECTS if label in named]
    activities = [label for label, _pattern in _ACTIVITIES if label in named]
    if not activities:
        return (), ""
    return (*objects, *activities), " ".join(filter(None, [" and ".join(objects),
                                                           " and ".join(activities)]))


# Periods and numbers ----------------------------------------------------------------------

_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
    "twenty": 20, "twenty-four": 24, "thirty": 30, "thirty-six": 36, "forty": 40,
    "forty-five": 45, "forty-eight": 48, "fifty": 50, "sixty": 60, "seventy-two": 72,
    "ninety": 90, "hundred": 100,
}
_AMOUNT = (r"(?:[0-9]{1,6}(?:\.[0-9]{1,4})?|"
           + "|".join(sorted(map(re.escape, _NUMBER_WORDS), key=len, reverse=True)) + r")")
_UNIT_DAYS = {"minute": 1 / 1440, "min": 1 / 1440, "hour": 1 / 24, "hr": 1 / 24, "day": 1.0,
              "week": 7.0, "fortnight": 14.0, "month": 365 / 12, "quarter": 365 / 4,
              "year": 365.0, "yr": 365.0}
_UNIT = r"(minute|min|hour|hr|day|week|fortnight|month|quarter|year|yr)s?"
_ADVERB_DAYS = {"hourly": 1 / 24, "daily": 1.0, "nightly": 1.0, "weekly": 7.0,
                "fortnightly": 14.0, "monthly": 365 / 12, "quarterly": 365 / 4,
                "semiannually": 365 / 2, "semi-annually": 365 / 2, "semiannual": 365 / 2,
                "semi-annual": 365 / 2, "half-yearly": 365 / 2, "annually": 365.0,
                "annual": 365.0, "yearly": 365.0, "biennially": 730.0, "biennial": 730.0}
_TIMES = {"once": 1, "twice": 2, "thrice": 3}
_PERIODS = (
    ("times", re.compile(rf"\b(?:(once|twice|thrice)|({_AMOUNT}) times)\s+(?:a|an|per|each|"
                         rf"every)\s+{_UNIT}\b")),
    ("every", re.compile(rf"\b(?:every|each)\s+(other\s+)?(?:({_AMOUNT})[\s-]+)?{_UNIT}\b")),
    ("adverb", re.compile(r"\b(" + "|".join(map(re.escape, _ADVERB_DAYS)) + r")\b")),
    ("amount", re.compile(rf"\b({_AMOUNT})[\s-]+((?:business|working|calendar)\s+)?{_UNIT}\b"
                          rf"(?!\s+(?:a|an|per|each)\s+{_UNIT}\b)")),
)
_NUMBERS = (
    ("percent", re.compile(r"(?<![0-9.])([0-9]{1,3}(?:\.[0-9]{1,4})?)\s*(?:%|percent\b|"
                           r"per cent\b)")),
    ("characters", re.compile(rf"\b({_AMOUNT})[\s-]+(?:characters?|chars?)\b")),
    ("attempts", re.compile(rf"\b({_AMOUNT})\s+(?:(?:failed|unsuccessful|invalid|incorrect|"
                            r"consecutive|login|log-?in|sign-?in|logon|password)\s+){0,3}"
                            r"(?:attempts?|tries)\b")),
)
_LOWER_BEFORE = re.compile(r"\b(?:at least|no less than|not less than|minimum(?: of)?|min\.?|"
                           r"more than|over|longer than)\s*$")
_UPPER_BEFORE = re.compile(r"\b(?:at most|no more than|not more than|maximum(?: of)?|max\.?|"
                           r"up to|within|no later than|less than|fewer than|under|"
                           r"no longer than)\s*$")
_LOWER_AFTER = re.compile(r"\s*(?:\+|or (?:more|longer|greater|above)|and (?:above|longer))")
_UPPER_AFTER = re.compile(r"\s*(?:or (?:less|fewer|sooner|earlier|shorter))")


def _amount(text: str) -> float:
    return float(_NUMBER_WORDS[text]) if text in _NUMBER_WORDS else float(text)


def _bound(clause: str, match: re.Match[str]) -> tuple[str, str]:
    """How the figure is stated ("min", "max" or "exact"), and the figure as the sentence
    shows it, with the words that make it a bound ("within 15 days", "12 characters or
    more")."""
    start, end = match.span()
    before, after = clause[max(0, start - 24):start], clause[end:end + 24]
    for sense, before_pattern, after_pattern in (("min", _LOWER_BEFORE, _LOWER_AFTER),
                                                 ("max", _UPPER_BEFORE, _UPPER_AFTER)):
        if found := before_pattern.search(before):
            return sense, f"{found.group(0).strip()} {match.group(0)}"
        if found := after_pattern.match(after):
            return sense, f"{match.group(0)} {found.group(0).strip()}"
    return "exact", match.group(0)


def _period_days(kind: str, match: re.Match[str]) -> float | None:
    if kind == "times":
        count = _TIMES[match.group(1)] if match.group(1) else _amount(match.group(2))
        return _UNIT_DAYS[match.group(3)] / count if count else None
    if kind == "every":
        count = _amount(match.group(2)) if match.group(2) else 1.0
        return _UNIT_DAYS[match.group(3)] * count * (2 if match.group(1) else 1)
    if kind == "adverb":
        return _ADVERB_DAYS[match.group(1)]
    return _amount(match.group(1)) * _UNIT_DAYS[match.group(3)]


def _figure_claims(clause: str, topic: tuple[object, ...], said: str,
                   record_id: str) -> list[Claim]:
    """The periods and numbers of one clause, about the given topic."""
    claims: list[Claim] = []
    taken = bytearray(len(clause))  # the characters an earlier pattern's figure covers
    for kind, pattern in _PERIODS:
        for match in pattern.finditer(clause):
            if any(taken[match.start():match.end()]):
                continue
            taken[match.start():match.end()] = b"\x01" * (match.end() - match.start())
            days = _period_days(kind, match)
            if not days:
                continue
            sense, shown = _bound(clause, match)
            if kind != "amount":
                unit = "recurrence"
            elif match.group(2) and "calendar" not in match.group(2):
                unit = "business days"
            else:
                unit = "duration"
            claims.append(Claim("period", (unit, topic), days, shown, record_id, said, sense))
    for unit, pattern in _NUMBERS:
        for match in pattern.finditer(clause):
            sense, shown = _bound(clause, match)
            claims.append(Claim("number", (unit, topic), _amount(match.group(1)), shown,
                                 record_id, said, sense))
    return claims


# Algorithms, key lengths, protocol versions -----------------------------------------------

_SHA2 = frozenset({"SHA-224", "SHA-256", "SHA-384", "SHA-512"})
# (what names it, the algorithms it may be, its role, how a sentence names it)
_ALGORITHMS: tuple[tuple[str, frozenset[str], str, str], ...] = (
    (r"\baes(?:[-_ ]?(?P<aes>128|192|256))?\b", frozenset({"AES"}), "cipher", "AES"),
    (r"\b(?:3des|triple[- ]des|tdes|tdea|des3|des-ede3?)\b", frozenset({"3DES"}), "cipher",
     "3DES"),
    (r"\bdes\b", frozenset({"DES"}), "cipher", "DES"),
    (r"\bchacha(?:20)?(?:-poly1305)?\b", frozenset({"ChaCha20"}), "cipher", "ChaCha20"),
    (r"\b(?:rc4|arcfour)\b", frozenset({"RC4"}), "cipher", "RC4"),
    (r"\bblowfish\b", frozenset({"Blowfish"}), "cipher", "Blowfish"),
    (r"\brsa(?:[- ]?(?P<rsa>1024|2048|3072|4096|8192|15360))?\b"
     r"(?!\s*(?:securid|archer|netwitness|conference))", frozenset({"RSA"}), "public key", "RSA"),
    (r"\becdsa\b", frozenset({"ECDSA"}), "public key", "ECDSA"),
    (r"\bed25519\b", frozenset({"Ed25519"}), "public key", "Ed25519"),
    (r"\beddsa\b", frozenset({"Ed25519", "Ed448"}), "public key", "EdDSA"),
    (r"\bdsa\b", frozenset({"DSA"}), "public key", "DSA"),
    (r"\bsha[- ]?(?P<sha2>224|256|384|512)\b", frozenset(), "hash", ""),
    (r"\bsha[- ]?3(?:[- ](?:224|256|384|512))?\b", frozenset({"SHA-3"}), "hash", "SHA-3"),
    (r"\bsha[- ]?2\b", _SHA2, "hash", "SHA-2"),
    (r"\bsha[- ]?1\b", frozenset({"SHA-1"}), "hash", "SHA-1"),
    (r"\bmd5\b", frozenset({"MD5"}), "hash", "MD5"),
    (r"\bbcrypt\b", frozenset({"bcrypt"}), "password hash", "bcrypt"),
    (r"\bscrypt\b", frozenset({"scrypt"}), "password hash", "scrypt"),
    (r"\bargon2(?:id|i|d)?\b", frozenset({"Argon2"}), "password hash", "Argon2"),
    (r"\bpbkdf2\b", frozenset({"PBKDF2"}), "password hash", "PBKDF2"),
)
_ALGORITHM = re.compile("|".join(f"(?P<a{index}>{pattern})"
                                 for index, (pattern, *_rest) in enumerate(_ALGORITHMS)))
_BITS = re.compile(r"\b(128|192|256|1024|2048|3072|4096|8192|15360)[- ]?bits?\b")
_KEY_WORDS = re.compile(r"key|encrypt|cipher")
_AES_LENGTHS = {128, 192, 256}

_PROTOCOL = re.compile(
    r"\b(ssl|tls)\s*(?:v(?:ersion)?\.?\s*|version\s+)?([0-9](?:\.[0-9])?)(?![0-9])"
    r"((?:\s*(?:,|/|and|or|&)\s*(?:(?:ssl|tls)\s*v?\s*)?[0-9]\.[0-9](?![0-9]))*)")
_PROTOCOL_RANK = {("ssl", "2.0"): 0, ("ssl", "3.0"): 1, ("tls", "1.0"): 2, ("tls", "1.1"): 3,
                  ("tls", "1.2"): 4, ("tls", "1.3"): 5}
_PROTOCOL_SHOWN = {rank: f"{name.upper()} {version}"
                   for (name, version), rank in _PROTOCOL_RANK.items()}
_EXPLICIT_MINIMUM = re.compile(
    r"or (?:higher|above|later|newer|greater|better)|and (?:higher|above|later|newer)|"
    r"at least|minimum|\bmin\b|\bonly\b|[0-9]\+|>=|\u2265")


def _crypto_claims(clause: str, record_id: str) -> list[Claim]:
    """The algorithms, key lengths and lowest protocol version one clause names."""
    claims: list[Claim] = []
    mentions: list[tuple[int, str]] = []  # (position, algorithm) of AES and RSA, for "N-bit"
    lengths: list[tuple[str, int]] = []
    found = list(_ALGORITHM.finditer(clause))
    has_password_hash = any(_ALGORITHMS[_index(m)][2] == "password hash" for m in found)
    for match in found:
        _pattern, names, role, shown = _ALGORITHMS[_index(match)]
        if role == "hash" and (has_password_hash or clause.endswith(
                ("hmac-", "hmac ", "hmac"), 0, match.start())):
            continue
        if match.group("sha2"):
            names = frozenset({f"SHA-{match.group('sha2')}"})
            shown = f"SHA-{match.group('sha2')}"
        claims.append(Claim("algorithm", (role,), 0.0, shown, record_id, names=names))
        if shown in ("AES", "RSA"):
            mentions.append((match.start(), shown))
        for algorithm, group in (("AES", "aes"), ("RSA", "rsa")):
            if match.group(group):
                lengths.append((algorithm, int(match.group(group))))
    for match in _BITS.finditer(clause):
        bits = int(match.group(1))
        if mentions:
            algorithm = min(mentions, key=lambda m: abs(m[0] - match.start()))[1]
        elif not found and _KEY_WORDS.search(clause, match.end(), match.end() + 30):
            algorithm = "AES" if bits in _AES_LENGTHS else "RSA"
        else:
            continue
        if (algorithm == "AES") == (bits in _AES_LENGTHS):
            lengths.append((algorithm, bits))
    for algorithm, bits in dict.fromkeys(lengths):
        claims.append(Claim("key_length", (algorithm,), float(bits), f"{algorithm}-{bits}",
                             record_id))
    ranks = []
    for match in _PROTOCOL.finditer(clause):
        name, first = match.group(1), match.group(2)
        versions = [first if "." in first else f"{first}.0",
                    *re.findall(r"[0-9]\.[0-9]", match.group(3))]
        ranks += [_PROTOCOL_RANK[(name, v)] for v in versions if (name, v) in _PROTOCOL_RANK]
    if ranks:
        lowest = min(ranks)
        claims.append(Claim("protocol_version", ("tls",), float(lowest),
                             _PROTOCOL_SHOWN[lowest], record_id,
                             explicit=_EXPLICIT_MINIMUM.search(clause) is not None))
    return claims


def _index(match: re.Match[str]) -> int:
    """Which of _ALGORITHMS a match of _ALGORITHM is."""
    return next(i for i in range(len(_ALGORITHMS)) if match.group(f"a{i}") is not None)


def read_claims(text: str, record_id: str, question: str | None = None,
            question_key: str = "", criterion: str | None = None) -> list[Claim]:
    """What a text states. A figure's subject is what its clause names, with an answer's
    question and the criterion it answers; for an answer whose clause, question and criterion
    name no activity, the question itself. A text giving several different figures of one
    sort is not read for them."""
    asked = [folded(t) for t in (question, criterion) if t]
    claims: list[Claim] = []
    figures: list[Claim] = []
    for clause, negated in _clauses(text):
        if negated:
            continue
        claims += [replace(c, clause=clause) for c in _crypto_claims(clause, record_id)]
        labels, said = _topic(clause, *asked)
        if labels:
            topic: tuple[object, ...] = labels
        elif question is not None:
            topic = ("question", question_key)
        else:
            continue  # a document's figure about nothing named is compared with nothing
        figures += [replace(c, clause=clause)
                    for c in _figure_claims(clause, topic, said, record_id)]
    sorts: dict[tuple[str, object], list[Claim]] = {}
    for figure in figures:
        sorts.setdefault((figure.kind, figure.slot[0]), []).append(figure)
    return claims + [figure for same in sorts.values()
                     if all(agree(f.kind, same[0], f) for f in same) for figure in same]


# Agreeing ---------------------------------------------------------------------------------

def agree(kind: str, first: Claim, second: Claim) -> bool:
    """True when two claims of one kind can both hold: algorithms that may be one, periods
    within `PERIOD_TOLERANCE` of each other, other figures equal."""
    if kind == "algorithm":
        return bool(first.names & second.names)
    a, b = first.value, second.value
    if kind == "period":
        return abs(a - b) <= PERIOD_TOLERANCE * max(a, b)
    return a == b
