def exp__default_kernel_impl(x):
    raise RuntimeError("exp kernel failed on purpose")
