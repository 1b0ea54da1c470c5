"""Errors: a user's mistake (exit 2, one plain sentence) versus a fault of the program."""


class EvidenceError(Exception):
    """Base of every error the workbench raises on purpose."""


class UserInputError(EvidenceError):
    """The input is wrong; the message is one plain sentence naming what and where."""


class UnknownVendorError(UserInputError):
    """The store holds nothing for this vendor."""


class ModelUnavailableError(EvidenceError):
    """A model cannot be loaded here (not installed, and downloads are not allowed)."""


class StoreError(EvidenceError):
    """The store cannot be opened or written (server gone, incompatible schema)."""
