"""What a document is: its kind, the title it gives itself, the standard it attests to, its
scope and who issued it, read from its text (its first page first) and, failing that, from its
file name."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from pathlib import PurePosixPath

from core.models import DocumentKind

# The standards a report, certificate or letter attests to, most specific first: the first
# that the document's opening names is its family.
_FAMILIES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE)) for name, pattern in (
        ("WebTrust for CAs - SSL Baseline", r"webtrust.{0,120}?(?:ssl|tls)\s+baseline|"
                                            r"baseline\s+requirements.{0,60}webtrust"),
        ("WebTrust for CAs - Network Security", r"webtrust.{0,120}?network\s+security"),
        ("WebTrust for CAs - Extended Validation", r"webtrust.{0,120}?extended\s+"
                                                   r"validation|webtrust.{0,40}\bEV\b"),
        ("WebTrust for CAs - Code Signing", r"webtrust.{0,120}?code\s+signing"),
        ("WebTrust for CAs - S/MIME", r"webtrust.{0,120}?s/mime"),
        ("WebTrust for CAs", r"webtrust"),
        ("ETSI EN 319 411", r"\bETSI\s+EN\s+319\s+41[13]"),
        ("key ceremony", r"key\s+(?:generation\s+)?ceremony"),
        ("bridge letter", r"\b(?:bridge|gap)\s+letter\b"),
        # "SOC 2", "SOC2", "SOC-2", "System and Organization Controls (SOC) 2", "SOC 2®"
        ("SOC 1", r"\bSOC\W{0,3}1\b|\bSOC\s+for\s+service\s+"
                  r"organi[sz]ations:?\s+ICFR"),
        ("SOC 3", r"\bSOC\W{0,3}3\b|organi[sz]ation\s+controls?\s+"
                  r"(?:\(soc\)\s+)?3\b"),
        ("SOC 2", r"\bSOC\W{0,3}2\b|organi[sz]ation\s+controls?\s+"
                  r"(?:\(soc\)\s+)?2\b|trust\s+services\s+"
                  r"(?:principles|criteria)"),
        ("ISO/IEC 27701", r"\bISO(?:/IEC)?\s*27701\b"),
        ("ISO/IEC 27018", r"\bISO(?:/IEC)?\s*27018\b"),
        ("ISO/IEC 27017", r"\bISO(?:/IEC)?\s*27017\b"),
        ("ISO/IEC 27001", r"\bISO(?:/IEC)?\s*27001\b"),
        ("ISO 22301", r"\bISO\s*22301\b"),
        ("ISO/IEC 20000-1", r"\bISO(?:/IEC)?\s*20000\b"),
        ("ISO 9001", r"\bISO\s*9001\b"),
        ("PCI DSS", r"\bPCI\s*DSS\b|attestation\s+of\s+compliance"),
        ("CSA STAR", r"\bCSA\s+STAR\b|\bSTAR\s*(?:certification|attestation|"
                     r"program|registry|level)"),
        ("TX-RAMP", r"\bTX-?RAMP\b|texas\s+risk\s+and\s+authori[sz]ation"),
        ("Cyber Essentials Plus", r"cyber\s+essentials\s+plus"),
        ("Cyber Essentials", r"cyber\s+essentials"),
        ("HITRUST", r"\bHITRUST\b"),
        ("FedRAMP", r"\bFedRAMP\b"),
        ("TISAX", r"\bTISAX\b"),
        ("BSI C5", r"\bC5\s+(?:attestation|report|type)|cloud\s+computing"
                   r"\s+compliance\s+criteria\s+catalogue"),
        ("penetration test", r"penetration\s+test|\bpen[\s-]?test"),
    ))
# Schemes whose evidence is a certificate (a report attests; these certify).
CERTIFIED_FAMILIES = frozenset({
    "ISO/IEC 27001", "ISO/IEC 27017", "ISO/IEC 27018", "ISO/IEC 27701", "ISO 22301",
    "ISO/IEC 20000-1", "ISO 9001", "CSA STAR", "Cyber Essentials", "Cyber Essentials Plus",
    "TX-RAMP", "TISAX"})
_SOC_TYPE = re.compile(r"\btype\s*(1|2|I{1,2})\b", re.IGNORECASE)

_REPORT_WORDS = re.compile(
    r"\breport\b|\bSOC\s*[123]\b|service\s+organi[sz]ation\s+control|"
    r"independent\s+(?:service\s+)?auditor|accountants?['\u2019]?s?\s+"
    r"report|webtrust|attestation\s+report|assurance\s+report|"
    r"penetration\s+test|key\s+(?:generation\s+)?ceremony|"
    r"examination\s+report|audit\s+report", re.IGNORECASE)
_CERTIFICATE_WORDS = re.compile(r"\bcertificate\b|\bcertif(?:y|ies)\s+that\b|"
                                r"\bcertificate\s+(?:number|no\.?|of\s+"
                                r"registration)|\bregistration\s+(?:number|no\.?)",
                                re.IGNORECASE)
# A title that names a certification (not a certification practice statement, a policy).
_CERTIFICATION_TITLE = re.compile(r"^[^\n]*\bcertification\b(?![^\n]*(?:practice|policy|"
                                  r"statement|program[^\n]*polic))", re.IGNORECASE | re.MULTILINE)
# A one-page certificate whose labels are pictures still says how to check it.
_VERIFY_CERTIFICATE = re.compile(r"authenticity\s+of\s+this\s+"
                                 r"certificate", re.IGNORECASE)
_CERTIFIES = re.compile(r"\b(?:this\s+is\s+to\s+certify|certif(?:y|ies)"
                        r"\s+that|has\s+been\s+(?:assessed|audited|"
                        r"certified|registered)|is\s+certified|certificate\s+"
                        r"(?:number|no\.?)|valid\s+until|expiry\s+date|"
                        r"date\s+of\s+expiry|expiration\s+date)",
                        re.IGNORECASE)
_LETTER_WORDS = re.compile(r"\b(?:bridge|gap|comfort|authori[sz]ation|attestation|engagement|"
                           r"representation)\s+letter\b|\bletter\s+of\s+"
                           r"(?:assessment|attestation|authori[sz]ation|compliance)\b|"
                           r"^\s*dear\s+", re.IGNORECASE | re.MULTILINE)
_LETTER_CLOSE = re.compile(r"^\s*(?:sincerely|regards|best\s+regards|"
                           r"respectfully|yours\s+(?:truly|faithfully|sincerely))\b",
                           re.IGNORECASE | re.MULTILINE)
_POLICY_WORDS = re.compile(r"\bpolic(?:y|ies)\b|\bprocedures?\b|\bstandard\b|\bplan\b|"
                           r"\bprogram(?:me)?\b|\bhandbook\b|\bcharter\b|\bguidelines?\b",
                           re.IGNORECASE)
_POLICY_MARKS = re.compile(r"^[\s#*|]*(?:purpose|scope|roles\s+and\s+"
                           r"responsibilities|policy\s+statement|enforcement|"
                           r"revision\s+history|document\s+control|"
                           r"version\s+history)\b", re.IGNORECASE | re.MULTILINE)
# A title that says what the document is, not only whose it is.
NAMES_A_KIND = re.compile(_POLICY_WORDS.pattern + r"|\breport\b|\bcertificate\b|\bletter\b|"
                          r"\bquestionnaire\b|\bstatement\b|\bassessment\b|\bevidence\b|"
                          r"\bconfiguration\b|\bsettings\b|\bschedule\b|\boverview\b|"
                          r"\bsummary\b|\bdescription\b|\bmatrix\b|\bregister\b",
                          re.IGNORECASE)
_QUESTIONNAIRE_ID = re.compile(r"\b[A-Z&]{2,4}-\d{2}(?:\.\d{1,2})?\b")
_QUESTIONNAIRE_WORDS = re.compile(r"\bquestionnaire\b|\bCAIQ\b|\bHECVAT\b|\bSIG\s+"
                                  r"(?:lite|core)\b|\bVSAQ\b", re.IGNORECASE)

# Audit firms and certification bodies seen signing vendors' reports and certificates; a
# name the list lacks is found by its legal form ("..., LLP").
KNOWN_ISSUERS = (
    "A-LIGN", "Advantage Partners", "Aprio", "Armanino", "Baker Tilly", "BARR Advisory",
    "BDO", "Boulay", "BSI", "Bureau Veritas", "Cherry Bekaert", "Coalfire", "CohnReznick",
    "Crowe", "Deloitte", "DNV", "Eide Bailly", "Ernst & Young", "EY", "Grant Thornton",
    "Insight Assurance", "Intertek", "Johanson Group", "KirkpatrickPrice", "KPMG",
    "Linford & Co", "LRQA", "Marcum", "Moss Adams", "NCC Group", "NQA",
    "Perry Johnson Registrars", "Plante Moran", "Prescient Assurance",
    "PricewaterhouseCoopers", "PwC", "RSM", "Schellman", "Sensiba", "SGS", "Sikich",
    "Tevora", "TÜV Rheinland", "TÜV SÜD", "TÜV NORD", "TÜV AUSTRIA", "Weaver", "Wipfli",
    "Auren", "Mazars", "Forvis", "Cure53", "Trail of Bits", "Include Security", "Bishop Fox",
    "Doyensec", "Atredis", "X41 D-Sec", "Certification Europe", "Mastermind",
)
_KNOWN = re.compile(r"(?<![\w-])(?:" + "|".join(re.escape(n) for n in sorted(
    KNOWN_ISSUERS, key=len, reverse=True)) + r")(?![\w-])")
_LEGAL_FORM = re.compile(
    r"(?P<name>(?:(?:[A-Z][\w&'\u2019.-]*|&)[ \t\u00a0]+){0,4}[A-Z][\w&'\u2019.-]*),?[ \t\u00a0]+"
    r"(?P<form>LLP|L\.L\.P\.|LLC|L\.L\.C\.|P\.C\.|PLLC|CPAs?|PLC|GmbH|AG|B\.V\.|S\.A\.|Ltd\.?|"
    r"Limited)\b")
# A statement of applicability, by its name (in its title) or by the columns of its table
# (at its top: a certificate may name the statement it was issued against further down).
_SOA = re.compile(r"statement\s+of\s+applicability", re.IGNORECASE)
_SOA_COLUMNS = re.compile(r"applicab(?:le|ility)\s*[\[(]\s*(?:y/n|n\s*or\s*y)|"
                          r"controlled\s+by\s+3rd\s+party", re.IGNORECASE)
_CERTIFIER = re.compile(r"certif|assurance|registrar|audit|assessment|verification|"
                        r"accreditation|inspection|quality", re.IGNORECASE)
_BRIDGE = re.compile(r"\b(?:bridge|gap)\s+letter\b", re.IGNORECASE)
_ISSUER_LABEL = re.compile(
    r"^[\s|*#-]*(?:service\s+auditor|independent\s+auditor|auditor|"
    r"audit\s+firm|assessor|assessed\s+by|audited\s+by|certification"
    r"\s+body|certified\s+by|issued\s+by|tested\s+by)"
    r"[\s*]*[:|][\s*]*(?P<name>[A-Z][^\n|(]{2,80})", re.IGNORECASE | re.MULTILINE)
_ADDRESSED = re.compile(r"\bto\s+the\s+(?:management|board\s+of"
                        r"\s+directors|shareholders)\s+of[^\n:]{3,80}",
                        re.IGNORECASE)
_NOT_ISSUERS = {"the", "our", "service", "company", "report", "page", "independent"}

# Words of a title or file name that change from one version to the next.
_VARYING = re.compile(
    r"\b(?:(?:19|20)\d\d|fy\d\d|q[1-4]|v\d+(?:\.\d+)*|version\s+\d+(?:\.\d+)*|rev"
    r"(?:ision)?\s*\d+|final|signed|draft|copy|updated?|new|latest|current|\d+)\b",
    re.IGNORECASE)
_MONTH_WORD = re.compile(r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\b",
                         re.IGNORECASE)
MAX_TITLE_CHARS = 160
MAX_SCOPE_CHARS = 240


def opening(pages: Sequence[str], chars: int = 4000) -> str:
    """The document's first text: its first page or two, as far as `chars`."""
    text = ""
    for page in pages:
        text += page + "\n"
        if len(text) >= chars:
            break
    return text[:chars]


def read_family(pages: Sequence[str]) -> str | None:
    """The standard the document attests to, from its opening, else the one its whole text
    names most; SOC 1 and SOC 2 reports with their type ("SOC 2 Type II")."""
    head = opening(pages)
    # The standard its opening names first (a certificate names the standards its body is
    # accredited under before the one it certifies, but none of those is a family).
    named = [(m.start(), order, name) for order, (name, pattern) in enumerate(_FAMILIES)
             for m in [pattern.search(head)] if m is not None]
    family = min(named)[2] if named else None
    if family is None:
        whole = "\n".join(pages)
        counts = Counter({name: len(pattern.findall(whole)) for name, pattern in _FAMILIES})
        best = [name for name, n in counts.most_common(1) if n >= 2]
        family = best[0] if best else None
    if family in ("SOC 1", "SOC 2"):
        kind = _SOC_TYPE.search(head)
        if kind:
            family += " Type II" if kind.group(1).upper() in ("2", "II") else " Type I"
    return family


# Headings that open a document's sections, not name the document.
_GENERIC_HEADING = re.compile(r"^\s*(?:\d+(?:\.\d+)*\.?\s|(?:introduction|overview|table\s+"
                              r"of\s+contents|contents|purpose|scope|summary|"
                              r"background|about)\b)", re.IGNORECASE)
# A document that says it is a certificate policy or practice statement is a policy, however
# often it says "certificate".
_CA_POLICY = re.compile(r"certificate\s+policy|certification\s+practices?"
                        r"\s+statement|\bCP/CPS\b", re.IGNORECASE)


def titles(headings: Sequence[str]) -> list[str]:
    """The headings that can be a document's title: not a section's ("1. Introduction")."""
    return [h for h in headings if not _GENERIC_HEADING.match(h)]


def title_zone(pages: Sequence[str], headings: Sequence[str]) -> str:
    """Where a document says what it is: its title heading where it has headings, else its
    first few short lines."""
    if headings:
        return "\n".join(titles(headings)[:1])
    lines = [" ".join(line.split()) for line in opening(pages, 1500).splitlines()]
    return "\n".join([line for line in lines if line and len(line) <= MAX_TITLE_CHARS][:6])


def names_family(family: str, text: str) -> bool:
    """Whether the text names this standard ("SOC 2 Type II" as SOC 2)."""
    pattern = dict(_FAMILIES).get(family.split(" Type ")[0])
    return bool(pattern and pattern.search(text))


def read_kind(pages: Sequence[str], headings: Sequence[str], source: str,
              family: str | None) -> DocumentKind:
    """policy, report, certificate, letter, questionnaire_page or other: from what its title
    says it is, then from its opening, then from its file name."""
    head = opening(pages, 2500)
    whole = "\n".join(pages)
    whole_ids = len(set(_QUESTIONNAIRE_ID.findall(whole)))
    zone = title_zone(pages, headings)
    if whole_ids >= 8 and _QUESTIONNAIRE_WORDS.search(whole[:20000]):
        return "questionnaire_page"
    if family == "bridge letter" or _LETTER_WORDS.search(zone) or (
            re.search(r"^\s*dear\s+", head, re.I | re.M)
            and _LETTER_CLOSE.search(whole)):
        return "letter"
    if _SOA.search(zone) or _SOA_COLUMNS.search(head[:1500]) or _CA_POLICY.search(head):
        # Documents that name a standard or the certificates they govern: policies, not an
        return "policy"  # attestation or a certificate
    named = family is not None and names_family(family, zone)
    if named and (_CERTIFICATE_WORDS.search(zone) or _CERTIFICATION_TITLE.search(zone)):
        return "certificate"
    if named and family in CERTIFIED_FAMILIES:  # a scheme that certifies, by its name
        return "certificate"
    if named:  # "Payment Card Industry Data Security Standard": an attestation, not a policy
        return "report"
    if _POLICY_WORDS.search(zone) and not _CERTIFICATE_WORDS.search(zone):
        return "policy"
    if re.match(r"\W*certificate\b", zone, re.IGNORECASE) or (
            _CERTIFICATION_TITLE.search(zone) and len(pages) <= 6):  # its title says so
        return "certificate"
    if _CERTIFICATE_WORDS.search(zone) and _CERTIFIES.search(head) and len(pages) <= 6:
        return "certificate"
    if _REPORT_WORDS.search(zone):
        return "report"
    if (_CERTIFICATE_WORDS.search(head) and _CERTIFIES.search(head) and len(pages) <= 6) or (
            _VERIFY_CERTIFICATE.search(head) and len(pages) <= 2):
        return "certificate"
    if not headings and _REPORT_WORDS.search(head[:600]):  # a title line of a PDF or text
        return "report"
    if len(_POLICY_MARKS.findall(head)) >= 2:
        return "policy"
    name = PurePosixPath(source).stem.replace("_", " ").replace("-", " ")
    if _CERTIFICATE_WORDS.search(name) or re.search(r"\bcert\b|\biso\b", name, re.I):
        return "certificate"
    if _REPORT_WORDS.search(name) or family is not None:
        return "report"
    if _POLICY_WORDS.search(name) or re.search(r"continuity|disaster recovery", name, re.I):
        return "policy"
    if whole_ids >= 8:
        return "questionnaire_page"
    return "other"


_TITLE_LABEL = re.compile(r"\s+(?:date|dated|version|rev(?:ision)?|document\s+"
                          r"(?:number|no\.?)|last\s+updated)\s*[:#].*$",
                          re.IGNORECASE)


def _title_part(line: str) -> str:
    """A line's text before a label that follows the title on it ("Statement of
    Applicability Date: September 16, 2021")."""
    return _TITLE_LABEL.sub("", line).strip()


def _title_line(line: str) -> bool:
    """Whether a line of a document's opening could be its title."""
    words = line.split()
    if not 1 <= len(words) <= 20 or len(line) > MAX_TITLE_CHARS:
        return False
    letters = sum(ch.isalpha() for ch in line)
    if letters < 4 or letters < len(line.replace(" ", "")) * 0.6:
        return False
    lowered = line.lower()
    if re.search(r"\b(?:number|no\.|date|address|tel|phone|fax|e-?mail)\b[\s:]|\bqr\b|"
                 r"\bscan\b", lowered):
        return False  # a labelled field ("Certificate number: 2013-009"), not a title
    return not (lowered.startswith(("page ", "confidential", "copyright", "©", "http", "www.",
                                    "this ", "the following"))
                or lowered.rstrip(".").endswith(("confidential", "proprietary"))
                or line.endswith("-"))  # a sentence, or a line broken inside a word


def read_title(pages: Sequence[str], headings: Sequence[str], kind: DocumentKind) -> str | None:
    """The title the document gives itself: its first heading where it has headings, else
    the first line of its opening that reads as a title (for a report, the line that names
    it a report, where its first lines name it)."""
    named = titles(headings[:3])
    if named:
        return " ".join(named[0].split())[:MAX_TITLE_CHARS]
    if headings:
        return None
    lines = [_title_part(" ".join(line.strip(" #*|\t").split()))
             for line in opening(pages, 2500).splitlines()]
    lines = [line for line in lines[:40] if line]
    if kind == "report":
        named = [line for line in lines[:25] if _title_line(line) and _REPORT_WORDS.search(line)]
        if named:
            return named[0][:MAX_TITLE_CHARS]
    if kind == "certificate":
        named = [line for line in lines[:25] if _title_line(line)
                 and re.search(r"certificate", line, re.I)]
        if named:
            return named[0][:MAX_TITLE_CHARS]
    if kind == "certificate":
        return None  # the lines of a certificate without one naming it are names and places
    if kind == "policy":
        named = [line for line in lines[:10] if _title_line(line) and (
            _POLICY_WORDS.search(line) or re.search(r"statement of applicability", line, re.I))]
        if named:
            return named[0][:MAX_TITLE_CHARS]
    for line in lines[:15]:
        if _title_line(line):
            return line[:MAX_TITLE_CHARS]
    return None


_SCOPE_PATTERNS = (
    re.compile(r"\bscope(?:\s+of\s+(?:the\s+)?(?:certification|"
               r"registration|certificate|audit|assessment))?\s*[:\-\u2013]"
               r"\s*(?P<scope>[^\n].{8,}?)(?:\n\s*\n|(?<=[a-z)])\.\s|$)",
               re.IGNORECASE | re.DOTALL),
    re.compile(r"\b(?:for\s+the\s+following\s+scope|(?:is|are)"
               r"\s+applicable\s+to)"
               r"[\s:]*(?P<scope>.{8,}?)(?:\n\s*\n|(?<=[a-z)])\.\s|$)",
               re.IGNORECASE | re.DOTALL),
    re.compile(r"\bthe\s+scope\s+of\s+th(?:is|e)\s+[^.]{0,60}?"
               r"(?:certification|certificate|registration|report|examination)\s+"
               r"(?:is|includes|covers|comprises)\s+(?P<scope>[^.]{8,}?)\.",
               re.IGNORECASE | re.DOTALL),
    re.compile(r"\breport\s+on\s+(?:the\s+)?(?P<scope>[^.\n]{2,80}?"
               r"\s+(?:system|services?|platform|operations))\b", re.IGNORECASE),
    re.compile(r"\bdescription\s+of\s+(?:its|the|their)\s+(?P<scope>"
               r"[^.]{3,160}?\s+(?:system|services?|platform|operations))\b",
               re.IGNORECASE | re.DOTALL),
)


# Words a scope is introduced by, not part of it ("the boundaries of its Canvas system").
_SCOPE_LEAD = re.compile(r"^(?:(?:the|its)\s+)?(?:boundaries|description|design)"
                         r"\s+of\s+(?:its|the|their)\s+", re.IGNORECASE)


def read_scope(pages: Sequence[str]) -> str | None:
    """What the document covers, as it says: a certificate's scope, a report's system."""
    head = opening(pages, 8000)
    for pattern in _SCOPE_PATTERNS:
        m = pattern.search(head)
        if m:
            scope = _SCOPE_LEAD.sub("", " ".join(m["scope"].split())).strip(" .;:")
            if len(scope.split()) >= 2:
                return scope[:MAX_SCOPE_CHARS]
    return None


def read_issuer(pages: Sequence[str], kind: DocumentKind) -> str | None:
    """Who issued it: the audit firm or certification body the text names most (a known
    name, else one by its legal form, from the opening and the closing pages); "the vendor"
    for its own policies and letters; None when unstated."""
    if kind in ("policy", "questionnaire_page"):
        return "the vendor"
    text = "\n".join([opening(pages, 6000), *pages[-3:]]) if len(pages) > 2 else "\n".join(pages)
    labelled = _ISSUER_LABEL.search(text)
    if labelled:
        return " ".join(labelled["name"].split()).rstrip(" .,;")
    known = Counter(m.group(0) for m in _KNOWN.finditer(text))
    if known:
        name = known.most_common(1)[0][0]
        # The name as the text writes it in full: with its legal form ("Ernst & Young LLP"),
        # else with the words that follow it ("EY CertifyPoint").
        full = re.search(re.escape(name) + r"(?:\s+[A-Z][\w&'\u2019.-]*){0,3},?"
                         r"\s+(?:LLP|LLC|Inc\.|Ltd\.?|Limited|GmbH|AG|P\.C\.|PLLC|plc|"
                         r"B\.V\.?)(?![\w])", text)
        longer = Counter(" ".join(m.group(0).split()) for m in re.finditer(
            re.escape(name) + r"(?:[ \u00a0][A-Z][a-z]+[A-Z]?\w*){1,2}", text))
        if full:
            return " ".join(full.group(0).split())
        if longer and longer.most_common(1)[0][1] >= 2:
            return longer.most_common(1)[0][0]
        return name
    # The organisation the document is about is named in its address lines ("To the
    # Management of ..."); its auditor is not.
    subject = " ".join(m.group(0) for m in _ADDRESSED.finditer(text))
    forms: Counter[str] = Counter()
    for m in _LEGAL_FORM.finditer(text):
        name = " ".join(m["name"].split())
        if name.split()[0].lower() in _NOT_ISSUERS or len(name) < 3 or name in subject:
            continue
        # An audit firm's legal form first: a partnership or professional corporation.
        weight = 3 if m["form"] in ("LLP", "L.L.P.", "P.C.", "PLLC", "CPA", "CPAs") else 1
        forms[" ".join(m.group(0).split())] += weight  # the name as the text writes it
    if kind == "certificate":
        # A certificate names the organisation it certifies as often as its issuer: only a
        # name that says it certifies is taken for the issuer.
        bodies = [name for name in forms if _CERTIFIER.search(name)]
        return max(bodies, key=lambda name: forms[name]) if bodies else None
    if kind == "letter":
        # A bridge letter is the vendor's own word, whatever auditor it names.
        if _BRIDGE.search(text) or not forms:
            return "the vendor"
        return forms.most_common(1)[0][0]
    return forms.most_common(1)[0][0] if forms else None


def series_words(text: str) -> str:
    """A title's or file name's words that stay the same from one version to the next:
    lower case, without years, dates, version numbers and words such as "final"."""
    text = PurePosixPath(text).stem if "." in text[-6:] else text
    text = re.sub(r"[_\-.+]+", " ", text)
    text = _MONTH_WORD.sub(" ", _VARYING.sub(" ", text))
    return " ".join(re.findall(r"[a-z0-9&/]+", text.lower()))
