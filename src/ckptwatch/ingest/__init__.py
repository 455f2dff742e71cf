"""Raw telemetry files into the lake: find and recognise them (``discover``), parse them into
canonical rows and quarantine (``run``), write each file as one transaction."""
