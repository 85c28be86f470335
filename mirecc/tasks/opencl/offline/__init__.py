"""The OpenCL tasks' offline lab: the public datasets, their protocols,
embedding them, training and shipping the heads (``mire bench devmap|coarsening
--write-heads``) and the reports.  Never imported by the driver."""
