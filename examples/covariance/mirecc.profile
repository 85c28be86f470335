# mirecc decisions profile 1
openmp  covariance.c  kernel_covariance:0  be38f24feca1f9c4  threads=2,schedule=static,chunk=8  # 1.324x the baseline's median, 3 runs, 2.363-3.261 s
