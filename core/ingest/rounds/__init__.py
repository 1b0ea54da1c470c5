"""Follow-up questionnaire rounds read and validated before anything is written: the bulk JSON
payload, spreadsheets (.csv, .xlsx) of a standard questionnaire layout, of a `--columns`
mapping, of criterion, question and answer columns or of a guessed layout, questionnaires
published as PDFs or web pages, VSAQ answer files, and control implementation statements
(OpenControl components, OSCAL plans and component definitions).

The modules, each importing only those above it: `payload` (the bulk payload, its validation
and its records), `tables` (spreadsheet files opened, and a sheet's cells), `headers` and
`headed_tables` (a table whose header row names its columns), `answers` (what a layout
reader gives), `layouts` (the standard questionnaires), `mapping` (`--columns`), `guess`
(the layout of a table nobody described), `mapped_tables` (a mapped or guessed table over
every sheet that has it), `vsaq`, `id_tables` (a table of question ids read by its header
texts), `pdf_rows` (a table's rows read off a PDF's words and ruling lines), `pdf_tables` (a
questionnaire published as a PDF), `web_pages` (one published as a web page), `table_round`
(a round from a spreadsheet), `control_statements` (a system's control implementation
statements, one answer per control id) and `files` (round files read before any write).
Callers import from the modules."""
