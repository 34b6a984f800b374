def tanh_kernel(x):  # not the name BackendBench's layout asks for
    return x
