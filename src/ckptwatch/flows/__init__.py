"""The Prefect flows' bodies: ``ingest`` (raw directory -> lake) and ``nightly`` (ingest, stalls,
alerts, daily report). ``pipelines/*.py`` at the project root are thin entry points over these
(``prefect.yaml`` names them); the CLI imports them from here, so an installed wheel has them."""
