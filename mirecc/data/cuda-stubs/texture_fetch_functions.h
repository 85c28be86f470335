/* mirecc: an empty stand-in for a header CUDA 12+ no longer ships (or a
   separate wheel does) but clang's CUDA runtime wrapper still includes;
   used only to read device IR (mirecc/nvcc.py), never to build code. */
