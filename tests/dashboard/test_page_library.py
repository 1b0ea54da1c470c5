"""The "Evidence library" page: counts per vendor, uploads (refused whole on error), and the
chunk browser."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime

import openpyxl
import pytest

from core.trace.analysis import kind_label
from tests.conftest import AES_CRITERION, SAMPLE_DATA
from tests.dashboard.conftest import page
from tests.support import payloads
from tests.support.sentences import one_sentence
from tests.support.snapshot import assert_unchanged, store_snapshot

POLICY = (b"# Key rotation policy\n\nAll customer data keys are rotated every 90 days. "
          b"Rotation is logged and reviewed by the security team.\n")
KEY_LENGTH = payloads.response("Please confirm the key length used for stored data.",
                              "256-bit keys throughout.", AES_CRITERION)
UPLOADED = "2024-03-01T09:00:00Z"  # when the uploaded rounds were answered
# Round files as uploaded: rounds 6 and 7 of acme, each the one answer above.
ROUND_6, ROUND_7 = (json.dumps(payloads.round_payload(n, [KEY_LENGTH], timestamp=UPLOADED))
                    .encode() for n in (6, 7))


def table(at, column: str):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def status_of(workbench) -> dict:
    return {s.vendor_id: s.model_dump() for s in workbench.status()}


def test_counts_per_vendor_match_the_store(dashboard_workbench):
    at = page("library").run()

    assert not at.exception
    assert at.title[0].value == "Evidence library"
    rows = table(at, "Follow-up responses").set_index("Vendor")
    for status in dashboard_workbench.status():
        row = rows.loc[status.vendor_id]
        assert row["Documents"] == status.documents
        assert row["Document chunks"] == status.chunks
        assert row["Follow-up responses"] == status.followup_responses
        assert row["Rounds"] == ", ".join(map(str, status.rounds))
    by_type = table(at, "Type").set_index("Type")
    for status in dashboard_workbench.status():  # each type in words
        assert by_type[status.vendor_id][by_type[status.vendor_id] > 0].to_dict() == {
            kind_label(kind): count for kind, count in status.by_type.items()}
    by_round = table(at, "Follow-up document chunks")
    acme = by_round[by_round["Vendor"] == "acme"].set_index("Round")
    assert list(acme.index) == [1, 2, 3, 4, 5]
    acme_status = status_of(dashboard_workbench)["acme"]
    for number in acme.index:
        assert acme.loc[number, "Follow-up responses"] == (
            acme_status["by_type"][f"followup_response:{number}"])
    assert acme["Follow-up document chunks"].sum() == acme_status["by_type"]["followup_document"]
    assert acme.loc[2, "Follow-up documents"] >= 1  # kms_key_configuration.md


def test_uploading_a_markdown_document_writes_it(dashboard_workbench):
    before = status_of(dashboard_workbench)["acme"]
    at = page("library").run()
    assert at.text_input(key="upload_vendor").value == "acme"
    assert at.button(key="ingest_documents").disabled

    at.file_uploader(key="upload_documents").upload("key_rotation.md", POLICY, "text/markdown")
    at.run()
    at.button(key="ingest_documents").click().run()

    assert not at.exception
    assert not at.error
    assert "key_rotation.md added" in at.success[0].value
    after = status_of(dashboard_workbench)["acme"]
    assert after["documents"] == before["documents"] + 1
    assert after["by_type"]["tc_files"] > before["by_type"]["tc_files"]
    assert any(d["source"] == "key_rotation.md" for d in dashboard_workbench.documents("acme"))
    # The counts on the page were redrawn from the new store.
    assert table(at, "Follow-up responses").set_index("Vendor").loc["acme", "Documents"] == (
        after["documents"])


def test_followup_document_upload_with_round(dashboard_workbench):
    at = page("library").run()
    at.selectbox(key="upload_type").set_value("followup_document").run()
    at.number_input(key="upload_round").set_value(6).run()
    at.file_uploader(key="upload_documents").upload("round6_keys.txt", POLICY, "text/plain")
    at.run()
    at.button(key="ingest_documents").click().run()

    assert not at.exception
    stored = {d["source"]: d for d in dashboard_workbench.documents("acme")}
    assert stored["round6_keys.txt"]["type"] == "followup_document"
    assert stored["round6_keys.txt"]["round_number"] == 6


def test_a_refused_document_upload_writes_nothing(dashboard_workbench):
    before = status_of(dashboard_workbench)
    at = page("library").run()
    at.file_uploader(key="upload_documents").set_value([
        ("good.md", POLICY, "text/markdown"),
        ("broken.pdf", b"not a pdf at all", "application/pdf"),
    ])
    at.run()
    at.button(key="ingest_documents").click().run()

    assert not at.exception
    assert len(at.error) == 1
    message = at.error[0].value
    assert message.startswith("broken.pdf is not a PDF file") and one_sentence(message)
    assert "evidence-upload-" not in message  # no temporary folder in the sentence
    assert status_of(dashboard_workbench) == before


def test_an_invalid_questionnaire_json_is_refused_in_one_sentence(dashboard_workbench):
    before = status_of(dashboard_workbench)
    at = page("library").run()
    at.file_uploader(key="upload_questionnaires").upload(
        "round_6.json", b'{"vendor_id": "acme", "round_number": 6,', "application/json")
    at.run()
    at.button(key="ingest_questionnaires").click().run()

    assert not at.exception
    assert len(at.error) == 1
    message = at.error[0].value
    assert message.startswith("round_6.json is not valid JSON") and one_sentence(message)
    assert status_of(dashboard_workbench) == before


def test_one_bad_round_refuses_the_whole_upload(dashboard_workbench):
    before = status_of(dashboard_workbench)
    good, bad = ROUND_6, json.dumps(payloads.round_payload(7, [], timestamp=UPLOADED)).encode()
    at = page("library").run()
    at.file_uploader(key="upload_questionnaires").set_value([
        ("round_6.json", good, "application/json"),
        ("round_7.json", bad, "application/json"),
    ])
    at.run()
    at.button(key="ingest_questionnaires").click().run()

    assert not at.exception
    message = at.error[0].value
    assert message.startswith("round_7.json: field responses") and one_sentence(message)
    assert status_of(dashboard_workbench) == before


def test_a_valid_round_is_stored(dashboard_workbench):
    data = (SAMPLE_DATA / "vendors" / "northwind" / "questionnaires" / "round_1.json")
    payload = json.loads(data.read_text()) | {"round_number": 5}
    assert 5 not in status_of(dashboard_workbench)["northwind"]["rounds"]
    at = page("library").run()
    at.file_uploader(key="upload_questionnaires").upload(
        "northwind_round_5.json", json.dumps(payload).encode(), "application/json")
    at.run()
    at.button(key="ingest_questionnaires").click().run()

    assert not at.exception
    assert not at.error
    count = len(payload["responses"])
    assert at.success[0].value == f"northwind round 5: {count} responses stored."
    northwind = status_of(dashboard_workbench)["northwind"]
    assert 5 in northwind["rounds"]
    assert northwind["by_type"]["followup_response:5"] == count


def test_search_finds_chunks_with_aes_256(dashboard_workbench):
    at = page("library").run()
    at.text_input(key="library_search").set_value("AES-256").run()

    assert not at.exception
    rows = table(at, "round_number")
    assert list(rows.columns) == ["id", "type", "source", "page", "round_number", "text"]
    assert len(rows) > 0
    assert all("AES-256" in text for text in rows["text"])
    assert len(rows) == len(dashboard_workbench.browse_chunks("acme", contains="AES-256"))
    assert "kms_key_configuration.md" in set(rows["source"])

    at.selectbox(key="library_type").set_value("followup_response:1").run()
    rows = table(at, "round_number")
    assert set(rows["type"]) == {"round 1 answer"}  # the type in words
    assert set(rows["round_number"]) == {1}


# Refusals and progress, each through the page -------------------------------------------

def upload(at, key: str, files: list[tuple[str, bytes]], button: str):
    at.file_uploader(key=key).set_value([(n, d, "application/octet-stream") for n, d in files])
    at.run()
    return at.button(key=button).click().run()


def refusal(at) -> str:
    assert not at.exception
    assert len(at.error) == 1 and not at.success
    message = at.error[0].value
    assert one_sentence(message), message
    return message


def test_a_document_refusal_names_the_file_not_the_folder(dashboard_workbench):
    at = upload(page("library").run(), "upload_documents", [("empty.md", b"   \n")],
                "ingest_documents")
    assert refusal(at) == "empty.md has no extractable text."


def test_two_uploads_of_one_name_are_refused(dashboard_workbench):
    before = status_of(dashboard_workbench)
    at = upload(page("library").run(), "upload_documents",
                [("a.md", POLICY), ("dir/a.md", POLICY)], "ingest_documents")
    assert "both named 'a.md'" in refusal(at)
    assert status_of(dashboard_workbench) == before


def test_a_bad_vendor_id_is_refused(dashboard_workbench):
    at = page("library").run()
    at.text_input(key="upload_vendor").set_value("bad id!").run()
    at = upload(at, "upload_documents", [("a.md", POLICY)], "ingest_documents")
    assert "bad id!" in refusal(at)


def test_progress_is_reported_while_embedding(dashboard_workbench, monkeypatch):
    seen = []
    real = dashboard_workbench.ingest_documents

    def recording(*args, progress=None, **kwargs):
        def relay(stage, done, total):
            seen.append((stage, done, total))
            progress(stage, done, total)
        return real(*args, progress=relay, **kwargs)

    monkeypatch.setattr(dashboard_workbench, "ingest_documents", recording)
    at = page("library").run()
    at.selectbox(key="upload_type").set_value("soc2_summary").run()
    at.text_input(key="upload_track").set_value("bridge").run()
    at = upload(at, "upload_documents", [("bridge_letter.txt", POLICY)], "ingest_documents")

    assert not at.exception and not at.error
    assert ("embedding", 1, 1) in seen
    assert status_of(dashboard_workbench)["acme"]["by_type"]["soc2_summary:bridge"] == 1


@pytest.mark.parametrize(("files", "start"), [
    ([("r.json", b"\xff\xfe{")], "r.json is not valid UTF-8"),
    ([("r.json", b"[1, 2]")], "r.json must be a JSON object"),
    ([("r.json", ROUND_6),
      ("r2.json", json.dumps(payloads.round_payload(6, [KEY_LENGTH], vendor="bad id!",
                                                    timestamp=UPLOADED)).encode())],
     "r2.json: field vendor_id"),
    ([("a.json", ROUND_6),
      ("b.json", json.dumps(payloads.round_payload(6, [KEY_LENGTH], vendor="ACME",
                                                   timestamp=UPLOADED)).encode())],
     "Vendor id 'ACME'"),
])
def test_questionnaire_refusals_write_nothing(dashboard_workbench, files, start):
    before = status_of(dashboard_workbench)
    at = upload(page("library").run(), "upload_questionnaires", files, "ingest_questionnaires")
    assert refusal(at).startswith(start)
    assert status_of(dashboard_workbench) == before


# Spreadsheet rounds: a preview first, written only by the button -----------------------------

SHEET_ROWS = [
    ["Criterion", "Question", "Answer", "Reviewer notes"],
    [AES_CRITERION, "Which key length protects stored data?", "AES-256 everywhere.", "ok"],
    ["", "Who approves firewall changes?", "The change advisory board.", ""],
]


def xlsx_bytes(rows: list[list], title: str = "Answers") -> bytes:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = title
    for row in rows:
        sheet.append(row)
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def csv_bytes(rows: list[list[str]]) -> bytes:
    buffer = io.StringIO(newline="")
    csv.writer(buffer, lineterminator="\r\n").writerows(rows)
    return buffer.getvalue().encode("utf-8-sig")


def preview(at):
    return next(d.value for d in at.dataframe if list(d.value.columns) == [
        "row", "criterion", "question", "answer"])


def linked_rounds(workbench, vendor: str, criterion: str) -> dict[int, tuple[str, str]]:
    return {hit.round_number: (hit.question_text, hit.answer_text)
            for hit in workbench.linked_followups(vendor, criterion)}


@pytest.mark.parametrize("name, data", [("answers.xlsx", xlsx_bytes(SHEET_ROWS)),
                                        ("answers.csv", csv_bytes(SHEET_ROWS))])
def test_a_spreadsheet_round_is_previewed_then_written_by_the_button(
        dashboard_workbench, name, data):
    before = store_snapshot(dashboard_workbench)
    at = page("library").run()
    at.file_uploader(key="upload_questionnaires").upload(name, data, "application/octet-stream")
    at.run()

    assert not at.exception and not at.error
    # The vendor is the sidebar's and the round its last plus one; nothing is written yet.
    assert at.text_input(key="sheet_vendor").value == "acme"
    assert at.number_input(key="sheet_round").value == 6
    rows = preview(at)
    assert rows.to_dict("records") == [
        {"row": 2, "criterion": AES_CRITERION, "question": "Which key length protects stored "
         "data?", "answer": "AES-256 everywhere."},
        {"row": 3, "criterion": "", "question": "Who approves firewall changes?",
         "answer": "The change advisory board."}]
    notes = [c.value.replace("\\", "") for c in at.caption]
    assert "Column Reviewer notes is not part of a questionnaire round and was ignored." in notes
    button = at.button(key="ingest_spreadsheet_rounds")
    assert button.label == "Ingest 2 responses into round 6 for vendor acme"
    assert "ingest_questionnaires" not in [b.key for b in at.button]
    assert_unchanged(before, store_snapshot(dashboard_workbench))

    button.click().run()

    assert not at.exception and not at.error
    assert at.success[0].value == "acme round 6: 2 responses stored."
    assert linked_rounds(dashboard_workbench, "acme", AES_CRITERION)[6] == (
        "Which key length protects stored data?", "AES-256 everywhere.")
    acme = status_of(dashboard_workbench)["acme"]
    assert acme["by_type"]["followup_response:6"] == 2
    # The counts on the page were redrawn from the new store.
    assert table(at, "Follow-up responses").set_index("Vendor").loc["acme", "Rounds"] == (
        "1, 2, 3, 4, 5, 6")


def test_the_vendor_round_and_answer_time_are_the_reviewers(dashboard_workbench):
    at = page("library").run()
    at.file_uploader(key="upload_questionnaires").upload(
        "answers.csv", csv_bytes(SHEET_ROWS[:2]), "text/csv")
    at.run()
    at.text_input(key="sheet_vendor").set_value("northwind").run()
    assert at.number_input(key="sheet_round").value == 5  # northwind's rounds: 1 to 4
    at.number_input(key="sheet_round").set_value(9).run()
    at.datetime_input(key="sheet_time").set_value(datetime(2024, 6, 3, 14, 30)).run()

    assert at.button(key="ingest_spreadsheet_rounds").label == (
        "Ingest 1 response into round 9 for vendor northwind")
    assert any("answered 2024-06-03 14:30 UTC" in m.value.replace("\\", "")
               for m in at.markdown)
    at.button(key="ingest_spreadsheet_rounds").click().run()

    assert not at.exception and not at.error
    [hit] = [h for h in dashboard_workbench.linked_followups("northwind", AES_CRITERION)
             if h.round_number == 9]
    assert hit.timestamp.startswith("2024-06-03T14:30:00")
    assert 9 not in status_of(dashboard_workbench)["acme"]["rounds"]


@pytest.mark.parametrize("name, data, sentence", [
    ("answers.xlsx", xlsx_bytes([SHEET_ROWS[0], [AES_CRITERION, "Key length?", None]]),
     "answers.xlsx, sheet Answers, row 2, column Answer: the answer is blank."),
    ("answers.xlsx", xlsx_bytes([SHEET_ROWS[0], [AES_CRITERION, "Key length?", "=1+1"]]),
     "answers.xlsx, sheet Answers, row 2, column Answer: the cell holds a formula (=1+1); "
     "paste its value instead (Paste Special > Values)."),
    ("answers.csv", csv_bytes([["Criterion", "Answer"], [AES_CRITERION, "Yes."]]),
     "answers.csv, row 1: there is no question column (headers found: Criterion, Answer); the "
     "first non-blank row must hold the headers criterion, question and answer; or map the "
     "columns with --columns (for example --columns id=A,question=B,answer=C+E)."),
])
def test_a_refused_spreadsheet_is_one_sentence_and_offers_no_ingest(
        dashboard_workbench, name, data, sentence):
    before = store_snapshot(dashboard_workbench)
    at = page("library").run()
    at.file_uploader(key="upload_questionnaires").upload(name, data, "application/octet-stream")
    at.run()

    assert refusal(at) == sentence
    assert not preview_shown(at)
    assert not [b for b in at.button if b.key == "ingest_spreadsheet_rounds"]
    assert_unchanged(before, store_snapshot(dashboard_workbench))


def preview_shown(at) -> bool:
    return any(list(d.value.columns) == ["row", "criterion", "question", "answer"]
               for d in at.dataframe)


def test_a_bad_vendor_id_for_a_spreadsheet_is_refused(dashboard_workbench):
    at = page("library").run()
    at.file_uploader(key="upload_questionnaires").upload(
        "answers.csv", csv_bytes(SHEET_ROWS), "text/csv")
    at.run()
    at.text_input(key="sheet_vendor").set_value("bad id!").run()

    assert refusal(at).startswith("Vendor id 'bad id!' is not valid")
    assert not preview_shown(at)


def test_json_and_spreadsheet_rounds_together_are_previewed_and_written_together(
        dashboard_workbench):
    before = store_snapshot(dashboard_workbench)
    at = page("library").run()
    at.file_uploader(key="upload_questionnaires").set_value([
        ("round_7.json", ROUND_7, "application/json"),
        ("answers.xlsx", xlsx_bytes(SHEET_ROWS), "application/octet-stream"),
    ])
    at.run()

    assert not at.exception and not at.error
    assert [d.value["row"].tolist() for d in at.dataframe
            if list(d.value.columns) == ["row", "criterion", "question", "answer"]] == [
        [1], [2, 3]]
    button = at.button(key="ingest_spreadsheet_rounds")
    assert button.label == ("Ingest 1 response into round 7 for vendor acme and 2 responses "
                            "into round 6 for vendor acme")
    assert_unchanged(before, store_snapshot(dashboard_workbench))
    button.click().run()

    assert at.success[0].value == "acme round 7: 1 response; acme round 6: 2 responses stored."
    assert {6, 7} <= set(linked_rounds(dashboard_workbench, "acme", AES_CRITERION))


# Replacing a round ---------------------------------------------------------------------------

def sample_round_5() -> dict:
    return json.loads((SAMPLE_DATA / "vendors" / "acme" / "questionnaires" / "round_5.json")
                      .read_text(encoding="utf-8"))


def test_a_json_upload_replaces_its_round_when_the_box_is_ticked(dashboard_workbench):
    """Off by default (the upload joins the round); ticked, the round becomes the upload and
    the outcome says how many answers left it."""
    stored = sample_round_5()
    assert status_of(dashboard_workbench)["acme"]["by_type"]["followup_response:5"] == len(
        stored["responses"]) == 5
    kept = stored["responses"][0]
    at = page("library").run()
    assert at.checkbox(key="replace_round").value is False
    at.file_uploader(key="upload_questionnaires").upload(
        "round_5.json", json.dumps({**stored, "responses": [kept]}).encode(),
        "application/json")
    at.run()
    box = at.checkbox(key="replace_round")
    assert box.label == "Replace round 5 of acme with this upload"
    assert box.value is False

    box.check().run()
    at.button(key="ingest_questionnaires").click().run()

    assert not at.exception and not at.error
    assert at.success[0].value == ("acme round 5: 1 response stored. Round 5 of acme replaced: "
                                   "4 answers removed.")
    acme = status_of(dashboard_workbench)["acme"]
    assert acme["by_type"]["followup_response:5"] == 1
    assert acme["incomplete_chunks"] == 0
    rounds = table(at, "Follow-up document chunks")
    assert rounds.set_index(["Vendor", "Round"]).loc[("acme", 5), "Follow-up responses"] == 1
    answers = {row["answer_text"] for row in dashboard_workbench.browse_chunks(
        "acme", doc_type="followup_response:5")}
    assert answers == {kept["answer_text"]}


def test_a_spreadsheet_upload_replaces_the_round_it_is_given(dashboard_workbench):
    at = page("library").run()
    at.file_uploader(key="upload_questionnaires").upload(
        "answers.csv", csv_bytes(SHEET_ROWS), "text/csv")
    at.run()
    at.number_input(key="sheet_round").set_value(5).run()
    box = at.checkbox(key="replace_round")
    assert box.label == "Replace round 5 of acme with this upload"
    notes = [c.value for c in at.caption]
    assert any("these join them" in n for n in notes)

    box.check().run()
    assert any("the upload replaces them" in c.value for c in at.caption)
    at.button(key="ingest_spreadsheet_rounds").click().run()

    assert not at.exception and not at.error
    assert at.success[0].value == ("acme round 5: 2 responses stored. Round 5 of acme "
                                   "replaced: 5 answers removed.")
    assert status_of(dashboard_workbench)["acme"]["by_type"]["followup_response:5"] == 2


def test_a_replacement_naming_two_rounds_is_refused_and_writes_nothing(dashboard_workbench):
    before = store_snapshot(dashboard_workbench)
    at = page("library").run()
    at.file_uploader(key="upload_questionnaires").set_value([
        ("round_6.json", ROUND_6, "application/json"),
        ("round_7.json", ROUND_7, "application/json"),
    ])
    at.run()
    assert at.checkbox(key="replace_round").label == "Replace the round with this upload"
    at.checkbox(key="replace_round").check().run()
    at.button(key="ingest_questionnaires").click().run()

    assert not at.exception
    message = at.error[0].value
    assert message.startswith("The files given to replace name round 6 of vendor 'acme' and "
                              "round 7") and one_sentence(message)
    assert_unchanged(before, store_snapshot(dashboard_workbench))


# A whole vendor package ------------------------------------------------------------------------

def package_uploads() -> list[tuple[str, bytes]]:
    from tests.support.packages import package_files

    return [(name.rsplit("/", 1)[-1], data)
            for name, data in package_files(scanned=False).items() if not name.startswith(".")]


def test_a_package_is_previewed_file_by_file_and_written_only_when_confirmed(
        dashboard_workbench):
    at = page("library").run()
    at.text_input(key="package_vendor").set_value("globex").run()
    at.file_uploader(key="upload_package").set_value(
        [(n, d, "application/octet-stream") for n, d in package_uploads()])
    at.run()
    assert not at.exception and not at.error
    preview = table(at, "Becomes")
    assert dict(zip(preview["File"], preview["Becomes"], strict=True)) == {
        "Example CAIQ.xlsx": "questionnaire round", "HECVAT Full.xlsx": "questionnaire round",
        "ISO 27001 Certificate.md": "document",
        "Statement of Applicability.xlsx": "questionnaire round",
        "Access Control Policy.pdf": "document"}
    rounds = preview[preview["Becomes"] == "questionnaire round"]
    assert list(zip(rounds["File"], rounds["Round"], strict=True)) == [
        ("Example CAIQ.xlsx", 1), ("HECVAT Full.xlsx", 2),
        ("Statement of Applicability.xlsx", 3)]
    assert "globex" not in dashboard_workbench.vendor_ids()  # nothing written yet

    at.button(key="ingest_package").click().run()
    assert not at.exception and not at.error
    assert at.success[0].value.startswith("Package ingested: 2 documents")
    assert "Example CAIQ.xlsx as round 1 (2 responses)" in at.success[0].value
    globex = status_of(dashboard_workbench)["globex"]
    assert (globex["documents"], globex["rounds"]) == (2, [1, 2, 3])


def test_a_table_of_an_unknown_layout_is_read_by_the_mapping_given_on_the_page(
        dashboard_workbench):
    data = (b"Ref,Control question,Response,Notes\n"
            b"AC-1,Is access reviewed quarterly?,Yes,By the security team.\n")
    at = page("library").run()
    at.text_input(key="package_vendor").set_value("globex").run()
    at.file_uploader(key="upload_package").set_value(
        [("answers.csv", data, "text/csv"), ("policy.md", POLICY, "text/markdown")])
    at.run()
    preview = table(at, "Becomes")
    assert list(preview["Becomes"]) == ["cannot be read", "document"]
    assert at.button(key="ingest_package").disabled  # an unreadable file, and no skip asked
    at.text_input(key="package_map_answers.csv").set_value(
        "id=Ref,question=Control question,answer=Response+Notes")
    at.button[[b.label for b in at.button].index(
        "Read the tables with these columns")].click().run()
    assert not at.exception
    preview = table(at, "Becomes")
    assert list(preview["Becomes"]) == ["questionnaire round", "document"]
    at.button(key="ingest_package").click().run()
    assert not at.error
    [hit] = dashboard_workbench.linked_followups("globex", "Is access reviewed quarterly?")
    assert (hit.questionnaire_id, hit.answer_text) == ("AC-1", "Yes. By the security team.")


def test_a_package_with_an_unreadable_file_is_written_only_when_skipping_is_asked(
        dashboard_workbench):
    at = page("library").run()
    at.text_input(key="package_vendor").set_value("globex").run()
    at.file_uploader(key="upload_package").set_value(
        [("policy.md", POLICY, "text/markdown"), ("logo.png", b"\x89PNG", "image/png")])
    at.run()
    why = dict(zip(table(at, "Becomes")["File"], table(at, "Becomes")["Why"], strict=True))
    assert why["logo.png"].startswith("logo.png is not a format the workbench reads")
    assert "evidence-package-" not in " ".join(why.values())
    assert at.button(key="ingest_package").disabled
    at.checkbox(key="package_skip").check().run()
    at.button(key="ingest_package").click().run()
    assert at.success[0].value == ("Package ingested: 1 document (1 chunks); 1 skipped "
                                   "(logo.png).")
    assert status_of(dashboard_workbench)["globex"]["documents"] == 1


def test_a_guessed_layout_is_shown_with_its_sheets_and_corrected_on_the_page(
        dashboard_workbench):
    from tests.test_guessed_layouts import HOSTED, ON_PREMISES, control_workbook

    data = control_workbook({"On-Premises": ON_PREMISES, "Hosted Service": HOSTED})
    at = page("library").run()
    at.text_input(key="package_vendor").set_value("globex").run()
    at.file_uploader(key="upload_package").set_value(
        [("controls.xlsx", data, "application/octet-stream")])
    at.run()
    assert not at.exception and not at.error
    preview = table(at, "Becomes")
    assert list(preview["Kind"]) == ["guessed: id=B,question=C,answer=F+G+I"]
    assert preview["Sheets"][0].startswith("read: On-Premises, Hosted Service; left out: "
                                           "Summary (")
    assert any(i.value.startswith("Guessed the layout of controls.xlsx: id=B (Control ID)")
               for i in at.info)
    at.multiselect(key="package_sheets_controls.xlsx").set_value(["Hosted Service"])
    at.button[[b.label for b in at.button].index(
        "Read the tables with these columns")].click().run()
    assert not at.exception and not at.error
    preview = table(at, "Becomes")
    assert preview["Sheets"][0].startswith("read: Hosted Service; left out: ")
    at.button(key="ingest_package").click().run()
    assert not at.error
    hits = dashboard_workbench.linked_followups("globex", "Protection of Information at Rest")
    assert [h.source for h in hits] == ["controls.xlsx › Hosted Service › SC-28"]
