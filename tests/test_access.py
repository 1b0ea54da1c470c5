"""The access file (who may see which vendor and do what in a team's dashboard) and the
dashboard's refusal to serve every address without login."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.access import AccessPolicy, groups_of
from core.errors import UserInputError
from tests.support.oidc import TEAM_ACCESS
from tests.support.sentences import one_sentence

# The login tests' access file, with a group that may read every vendor.
ACCESS = TEAM_ACCESS + """
[groups.auditors]
role = "viewer"
vendors = ["*"]
"""


@pytest.fixture
def policy(tmp_path) -> AccessPolicy:
    path = tmp_path / "access.toml"
    path.write_text(ACCESS, encoding="utf-8")
    return AccessPolicy.load(path)


def test_a_group_gives_its_role_on_its_vendors_only(policy):
    rights = policy.rights(["acme-reviewers"])
    assert rights.visible(["acme", "northwind", "globex"]) == ["acme"]
    assert rights.may("decide", "acme") and rights.may("ask", "acme")
    assert not rights.may("ingest", "acme") and not rights.may("audit")
    assert not rights.sees("northwind") and not rights.may("read", "northwind")


def test_rights_are_the_union_over_groups_vendor_by_vendor(policy):
    rights = policy.rights(["northwind-viewers", "acme-reviewers", "not-in-the-file"])
    assert rights.groups == ("northwind-viewers", "acme-reviewers")
    assert rights.role_on("acme") == "reviewer" and rights.role_on("northwind") == "viewer"
    assert not rights.may("decide", "northwind")
    wide = policy.rights(["auditors", "acme-reviewers"])
    assert wide.visible(["acme", "northwind", "globex"]) == ["acme", "northwind", "globex"]
    assert wide.may("decide", "acme") and not wide.may("decide", "globex")
    assert policy.rights(["workbench-admins"]).may("ingest", "globex")


def test_no_group_gives_no_vendor(policy):
    rights = policy.rights([])
    assert rights.visible(["acme", "northwind"]) == []
    assert not rights.may("read") and rights.described() == "no vendor"
    assert policy.rights(["strangers"]).visible(["acme"]) == []


def test_groups_are_read_from_the_claim_as_a_list_or_one_name():
    assert groups_of({"groups": ["a", "b"]}, "groups") == ["a", "b"]
    assert groups_of({"roles": "admins"}, "roles") == ["admins"]
    assert groups_of({"groups": {"a": 1}}, "groups") == [] == groups_of({}, "groups")


@pytest.mark.parametrize(("text", "needle"), [
    ("[groups.x]\nrole = \"owner\"\nvendors = [\"acme\"]\n",
     "the role must be one of viewer, reviewer, admin, not 'owner'"),
    ("[groups.x]\nrole = \"viewer\"\nvendors = []\n", "vendors must be a list of vendor ids"),
    ("[groups.x]\nrole = \"viewer\"\nvendors = \"acme\"\n",
     "vendors must be a list of vendor ids"),
    ("[groups.x]\nrole = \"viewer\"\nvendors = [\"acme\"]\nexpires = 3\n",
     "has the key expires"),
    ("[users.alice]\nrole = \"admin\"\n", "has a table [users]"),
    ("[groups.x\nrole = 1\n", "is not valid TOML"),
])
def test_a_wrong_access_file_is_refused_in_one_sentence(tmp_path, text, needle):
    path = tmp_path / "access.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserInputError) as caught:
        AccessPolicy.load(path)
    assert needle in str(caught.value)
    assert one_sentence(str(caught.value), quotes_input=True)


def test_a_missing_access_file_is_named():
    with pytest.raises(UserInputError) as caught:
        AccessPolicy.load(Path("/nowhere/access.toml"))
    assert str(caught.value) == ("The access file /nowhere/access.toml "
                                 "(EVIDENCE_ACCESS_FILE) does not exist.")


# The dashboard without login ------------------------------------------------------------------

def app_on(address: str, monkeypatch, store: Path, **env: str):
    from streamlit import config
    from streamlit.testing.v1 import AppTest

    for name, value in {"EVIDENCE_STORE": str(store), **env}.items():
        monkeypatch.setenv(name, value)
    saved = config.get_option("server.address")
    config.set_option("server.address", address)
    try:
        return AppTest.from_file(str(Path(__file__).parents[1] / "dashboard" / "app.py"),
                                 default_timeout=120).run()
    finally:
        config.set_option("server.address", saved)


def test_without_login_the_dashboard_refuses_an_address_others_reach(monkeypatch, tmp_path):
    at = app_on("0.0.0.0", monkeypatch, tmp_path / "store")
    assert [e.value for e in at.error] == [
        "This dashboard has no login and is served on 0.0.0.0, where anyone who reaches it "
        "would see every vendor; configure login (docs/login.md), serve it on 127.0.0.1, or "
        "set EVIDENCE_ALLOW_ANONYMOUS=1 to serve it without login on purpose."]
    assert not at.sidebar.selectbox  # nothing of the store is shown
    assert not (tmp_path / "store").exists()  # nor opened


def test_serving_without_login_on_purpose_is_said_with_a_setting(monkeypatch, tmp_path):
    at = app_on("0.0.0.0", monkeypatch, tmp_path / "store", EVIDENCE_ALLOW_ANONYMOUS="1")
    assert not any("has no login" in e.value for e in at.error)


def test_an_access_file_without_login_is_refused(monkeypatch, tmp_path):
    access = tmp_path / "access.toml"
    access.write_text(ACCESS, encoding="utf-8")
    at = app_on("127.0.0.1", monkeypatch, tmp_path / "store",
                EVIDENCE_ACCESS_FILE=str(access))
    assert [e.value for e in at.error] == [
        "EVIDENCE_ACCESS_FILE is set, but .streamlit/secrets.toml has no [auth] section, so "
        "nobody logs in to be given its rights; configure login (docs/login.md) or unset "
        "EVIDENCE_ACCESS_FILE."]
