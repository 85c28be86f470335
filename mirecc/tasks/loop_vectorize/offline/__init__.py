"""The loop-vectorize task's offline lab: the loop-kernel dataset
(``mire vectorize-data``), head training (``mire vectorize-train``) and its
benchmark (``mire bench vectorize``).  Never imported by the driver."""
