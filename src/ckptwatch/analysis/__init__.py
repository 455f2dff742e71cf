"""What the lake says: latency marts (``latency``), detection thresholds (``detection``), stall
features (``stalls``), cause attribution (``attribution``), and the findings every later step
reads (``findings``)."""
