raise RuntimeError("BackendBench imports only the first implementation file in sorted order; so does bbshim")
