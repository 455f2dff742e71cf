"""Raw telemetry files into the lake: find and recognise them (``discover``), parse each into
canonical rows and quarantined records (``read``), write each file as one transaction
(``write``), and run those steps over a raw directory (``run``)."""
