"""Control catalogs: the NIST SP 800-53 Rev. 5 catalog shipped as package data (`catalog`),
the ISO/IEC 27001:2013 Annex A crosswalk NIST publishes for it (`crosswalk`), and control ids
as vendors write them in a questionnaire's id column (`ids`). `data/SOURCES.md` says where
each data file comes from and under what terms; `build_data` rebuilds them from NIST's files."""
