"""A customer responsibility matrix as FedRAMP's template lays it out (SSP Appendix J): per
sheet a title row, a guidance row, a blank row, then the header "Control ID | Can Be Inherited
from CSP | Specific Inheritance and Customer Agency/CSP Responsibilities" and one row per
control or control part ("AC-1(a)", "AC-2(1)"). Vendors send one sheet per offering. The
layout facts are the template's; the answers are the tests' own."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from openpyxl import Workbook

HEADER = ("Control ID", "Can Be Inherited from CSP",
          "Specific Inheritance and Customer Agency/CSP Responsibilities")


def write_matrix(path: Path, sheets: Mapping[str, Mapping[str, tuple[str, str]]]) -> Path:
    """A workbook of `sheets`: sheet name -> control id -> (inherited, responsibilities)."""
    book = Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        sheet.append([f"FedRAMP {name} Customer Responsibility Matrix (CRM) Worksheet"])
        sheet.append(["GUIDANCE: enter Yes, Partial or No, and say what the customer does."])
        sheet.append([])
        sheet.append(list(HEADER))
        for control, (inherited, text) in rows.items():
            sheet.append([control, inherited, text])
    book.save(path)
    return path


# One offering answered twice: the on-premises product and the hosted one.
ON_PREMISES = {
    "AC-2(a)": ("Partial", "Account types are defined in the customer's directory."),
    "AC-2(b)": ("Partial", "The customer names an owner for each account."),
    "AC-7": ("No", "NA - sign-in is delegated to the customer's identity provider."),
    "CP-4": ("No", "The customer rehearses its own recovery of the appliance."),
    "PS-3": ("No", "The customer screens its own administrators."),
    "SC-8": ("Partial", "TLS 1.2 between appliance nodes; the customer's network beyond."),
}
CLOUD = {
    "AC-2(a)": ("Yes", "Tenant account types are fixed by the service."),
    "AC-2(b)": ("Yes", "Every tenant administrator has a named owner."),
    "AC-7": ("Yes", "Five failures in fifteen minutes lock the sign-in for thirty minutes."),
    "CP-4": ("Yes", "The operations team restores a full region from copies twice a year."),
    "PS-3": ("Yes", "Operators pass a criminal-record check before they are given access."),
    "SC-8": ("Yes", "TLS 1.2 or later on every connection to the service."),
}
