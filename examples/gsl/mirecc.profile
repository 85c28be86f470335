# mirecc decisions profile 1
loop-vectorize  cblas/dgemm.c  cblas_dgemm:136  45a8828b627eec31  interleave.count=2,vectorize.width=4  # 1.052x the baseline's median, 3 runs, 0.345-0.438 s
