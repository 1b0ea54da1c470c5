"""The check an export passes before it embeds: the texts its vectors are compared with
torch's on, the threshold, the export folder's format, and the record (check.json) that
keeps the result."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Every check text's ONNX vector must be at least this close to its torch vector.
CHECK_MIN_COSINE = 0.9999
# Changed whenever the export or the check changes: older cache folders are then not read.
EXPORT_FORMAT = 1
OPSET = 17
MODEL_FILE = "model.onnx"
RECORD_FILE = "check.json"
# Check texts kept with their torch vectors in the record and encoded again at every start.
SPOT_CHECK_TEXTS = (0, 17, 33, 63)


_SHORT_TEXTS = (
    "Does the vendor encrypt data at rest using AES-256?",
    "Does the vendor enforce multi-factor authentication for administrative access?",
    "Are backups encrypted and tested for restoration at least annually?",
    "Does the vendor maintain an incident response plan that is tested annually?",
    "Is access to production systems reviewed quarterly?",
    "Does the vendor perform background checks on employees with access to customer data?",
    "Are security patches applied within 30 days of release?",
    "Does the vendor hold a current SOC 2 Type II report?",
    "Is customer data deleted within 90 days of contract termination?",
    "Are audit logs retained for at least 12 months and protected from tampering?",
    "Does the vendor use TLS 1.2 or higher for data in transit?",
    "Is there a documented business continuity plan with defined RTO and RPO?",
    "Can you confirm the encryption algorithm used for the backup media?",
    "Please describe how administrator accounts are protected.",
    "What happens to our data when the contract ends?",
    "How quickly do you notify customers after a confirmed breach?",
    "Yes.",
    "No.",
    "N/A",
    "Yes, AES-256-GCM with keys in AWS KMS.",
    "Partially: MFA is enforced for admins only.",
    "Yes — see the Cryptography Standard §4.2.",
    "Quarterly.",
    "Within 72 hours.",
    "",
    "   leading and trailing spaces   ",
    "Ünïcödé, naïve café, Straße — and “curly quotes”.",
    "数据在静态时使用 AES-256 加密。",
    "SHA-256 / TLS1.3 / ISO-27001:2022 / CVE-2024-3094 / 0x7f3a",
    "🔒 Encryption at rest: enabled ✅",
    "encrypt " * 300,
    "Can you elaborate on that?",
)


_POLICY_SENTENCES = (
    "All customer data stored in the production environment is encrypted at rest using "
    "AES-256, with keys held in a hardware security module and rotated every 12 months.",
    "Administrative access to the customer database cluster requires multi-factor "
    "authentication through the identity provider, and shared accounts are prohibited.",
    "Backups of the billing platform are taken daily, encrypted with a key separate from the "
    "production key, and a full restoration is rehearsed semi-annually.",
    "The Security Engineering team reviews access rights to the data warehouse quarterly; "
    "access no longer needed is revoked within 14 days of the review.",
    "Incident response follows the Operations Security Procedure: triage within one hour, "
    "containment within 24 hours, and customer notification within 72 hours of confirmation.",
    "Vulnerabilities rated critical are remediated within 7 days and high ones within 30 days, "
    "as tracked in the vulnerability scanner and reported to the Risk Committee monthly.",
    "Audit logs from every production host are forwarded to the central SIEM, retained for "
    "13 months, and protected against modification by write-once storage.",
    "The Data Protection Officer approves every new processing activity, and a data "
    "protection impact assessment is completed before any high-risk processing starts.",
    "Third-party integrations are assessed before onboarding against ISO/IEC 27001 Annex A, "
    "and their access tokens are scoped to the minimum set of permissions required.",
    "Corporate laptops run full-disk encryption, an endpoint detection agent and automatic "
    "screen locking after five minutes, enforced by the endpoint management console.",
    "Change requests to the CI/CD pipeline require peer review and an approved ticket in the "
    "ticketing workflow before deployment, with emergency changes reviewed within 48 hours.",
    "Customer data is deleted from primary storage within 30 days and from backups within "
    "90 days of contract termination, and a certificate of deletion is issued on request.",
    "The Business Continuity Plan sets a recovery time objective of four hours and a recovery "
    "point objective of one hour for the production environment, tested annually.",
    "Employees complete security awareness training at hiring and annually thereafter, with "
    "phishing simulations run quarterly and results reported to the Compliance Manager.",
    "Network traffic between services is encrypted with TLS 1.2 or higher; legacy protocols "
    "such as SSLv3 and TLS 1.0 are disabled at the load balancers.",
    "Physical access to the data centres is controlled by badge and biometric readers, and "
    "visitor logs are retained for 24 months.",
)


def _long_texts() -> tuple[str, ...]:
    """Policy paragraphs as the ingest chunks them (600 to 950 characters), and four that
    run past the model's sequence length, so truncation is checked too."""
    texts = []
    sentences = _POLICY_SENTENCES
    for i in range(28):
        target = 600 + (i * 53) % 350
        parts, k = [], i
        while sum(len(p) + 1 for p in parts) < target:
            parts.append(sentences[k % len(sentences)])
            k += 3
        texts.append(" ".join(parts))
    for i in range(4):
        texts.append(" ".join(sentences[(i + k) % len(sentences)] for k in range(14)))
    return tuple(texts)


CHECK_TEXTS: tuple[str, ...] = _SHORT_TEXTS + _long_texts()


@dataclass(frozen=True)
class CheckRecord:
    """The check of one export, as check.json keeps it."""

    data: dict[str, Any]

    @property
    def min_cosine(self) -> float:
        return float(self.data["min_cosine"])

    @property
    def texts(self) -> int:
        return int(self.data["texts"])

    @property
    def passed(self) -> bool:
        """Judged against today's threshold, not the one in force when it was recorded."""
        return self.min_cosine >= CHECK_MIN_COSINE

    @property
    def optimized(self) -> bool:
        return bool(self.data.get("optimized"))

    def summary(self) -> str:
        """`min cosine 0.9999999 on 64 texts`, the figure people read."""
        return f"min cosine {self.min_cosine:.7f} on {self.texts} texts"

    def refusal(self) -> str:
        return (f"its ONNX export's vectors differ from torch's ({self.summary()}, below "
                f"{CHECK_MIN_COSINE})")


def read_record(folder: Path) -> CheckRecord | None:
    """The check recorded in the folder, or None when there is none or it cannot be read."""
    try:
        data = json.loads((folder / RECORD_FILE).read_text(encoding="utf-8"))
        if data.get("format") != EXPORT_FORMAT:
            return None
        float(data["min_cosine"]), int(data["texts"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return CheckRecord(data)
