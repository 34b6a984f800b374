// BackendBench's CUDA form (its load_inline loader): this .cpp declares the function named as the folder,
// its .cu twin (same name, .cu) defines it; torch's load_inline builds both and binds relu__default.
#include <torch/extension.h>

torch::Tensor relu__default(torch::Tensor x);
