"""Follow-up questionnaire rounds read and validated before anything is written: the bulk JSON
payload, spreadsheets (.csv, .xlsx) of a standard questionnaire layout, of a `--columns`
mapping or of criterion, question and answer columns, and VSAQ answer files.

The modules, each importing only those above it: `payload` (the bulk payload, its validation
and its records), `tables` (spreadsheet files opened, and a sheet's cells), `headers` and
`headed_tables` (a table whose header row names its columns), `answers` (what a layout
reader gives), `layouts` (the standard questionnaires), `mapping` (`--columns`), `vsaq`,
`table_round` (a round from a spreadsheet) and `files` (round files read before any write).
Callers import from the modules."""
