"""The Prefect flows' bodies: ``ingest`` (raw directory -> lake) and ``nightly`` (ingest, stalls,
alerts, daily report), and ``run``: the nightly run itself and its failure policy, without
Prefect (the nightly flow wraps its steps as tasks). ``pipelines/*.py`` at the project root are
thin entry points over these (``prefect.yaml`` names them); the CLI imports them from here, so
an installed wheel has them."""
