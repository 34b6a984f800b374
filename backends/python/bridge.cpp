// libbbshim_python.so: Python functions of a backend folder as kernels (bridge.h). Arguments go to
// Python as torch's own Python ops pass them (positional, trailing defaults left out, keyword-only
// arguments by name when not their default; dtypes, layouts and memory formats as torch objects), and
// the result comes back checked against the op's returns.
#include <Python.h>
#include <pybind11/eval.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/tensor_memoryformats.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "backends/python/bridge.h"

namespace bb::backends::python {
namespace {

namespace py = pybind11;
using Stack = torch::jit::Stack;

// The `bbshim` module kernel files import: Decline, the kernel decorator, import_from (a third-party
// package's functions, or an error naming its version), and the importer the bridge
// uses (stdout captured while a file imports, registrations collected).
constexpr const char* kModuleSource = R"PY(
"""bbshim inside a Python program: what backend folders' Python kernels use (docs/backends.md)."""


class Decline(Exception):
    """Raised by a kernel for a call it does not handle: the native kernel runs, the call counts as declined."""


_registered = []


def kernel(op):
    """@bbshim.kernel("aten::relu") registers the decorated function as the kernel of that op."""
    if not isinstance(op, str):
        raise TypeError("bbshim.kernel takes an op name such as 'aten::relu' or 'aten::add.Tensor'")

    def register(fn):
        _registered.append((op, fn))
        return fn

    return register


def import_from(package, written_for, module, *names):
    """The functions `names` of `module`, from the third-party distribution `package` (pip's name) that the
    kernel was written for (version `written_for`): one value for one name, else a tuple. Where the package is
    missing, or this version has no such module or name, raises ImportError naming the version found and the
    one written for: the folder is then unusable and its op runs natively, saying why."""
    import importlib, importlib.metadata
    try:
        m = importlib.import_module(module)
        found = tuple(getattr(m, n) for n in names)
    except (ImportError, AttributeError) as e:
        try:
            version = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            raise ImportError(f"{package} is not installed (pip install {package}=={written_for})") from None
        wanted = " or ".join(f"{module}.{n}" for n in names)
        raise ImportError(f"{package} {version} has no {wanted} (this folder is written for {written_for}): {e}") \
            from None
    return found[0] if len(found) == 1 else found


class ImportTimeout(BaseException):  # (not Exception: a file's `except Exception` must not swallow it)
    """A folder's import (or build) ran past its time (BB_PYTHON_IMPORT_TIMEOUT)."""


def _within(seconds, fn):
    """fn() in this thread; past `seconds` (0: no limit) ImportTimeout is raised inside it at its next Python
    instruction. A call blocked in C code is not interrupted (the exception comes once it returns). The
    exception never outlives this function: one still pending when fn returns is cleared."""
    if not seconds or seconds <= 0:
        return fn()
    import ctypes, threading
    me, lock, state = threading.get_ident(), threading.Lock(), {"done": False, "fired": False}

    def interrupt():
        with lock:
            if not state["done"]:
                state["fired"] = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(me), ctypes.py_object(ImportTimeout))

    timer = threading.Timer(seconds, interrupt)
    timer.daemon = True
    timer.start()
    try:
        return fn()
    except ImportTimeout:
        raise ImportTimeout(f"did not finish within {seconds:g} s (BB_PYTHON_IMPORT_TIMEOUT)") from None
    finally:
        with lock:
            state["done"] = True
            if state["fired"]:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(me), None)
        timer.cancel()


def _import(path, name, seconds=0):
    import contextlib, importlib.util, io, sys
    if path.endswith((".cpp", ".cu")):
        return _within(seconds, lambda: _load_inline(path)), "", []
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"not a Python file Python can import: {path}")
    module = importlib.util.module_from_spec(spec)
    printed = io.StringIO()
    before = len(_registered)
    sys.modules[name] = module
    try:
        with contextlib.redirect_stdout(printed):
            _within(seconds, lambda: spec.loader.exec_module(module))
    except BaseException:
        del sys.modules[name]
        raise
    return module, printed.getvalue(), _registered[before:]


def _load_inline(path):
    """BackendBench's C++/CUDA form: <base>.cpp and <base>.cu (either may be missing) built by torch's
    load_inline, binding the function named as the folder. The module's name carries a hash of the
    sources: torch's extension cache builds each version once, and two backends never share a build."""
    import contextlib, hashlib, io, os
    from torch.utils.cpp_extension import load_inline
    base, folder = path.rsplit(".", 1)[0], os.path.basename(os.path.dirname(os.path.abspath(path)))
    sources = {}
    for ext in (".cpp", ".cu"):
        if os.path.exists(base + ext):
            with open(base + ext) as f:
                sources[ext] = f.read()
    digest = hashlib.sha256(repr(sorted(sources.items())).encode()).hexdigest()[:16]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return load_inline(name=f"bb_{folder}_{digest}", cpp_sources=sources.get(".cpp", ""),
                               cuda_sources=sources.get(".cu", ""), functions=[folder], no_implicit_headers=True)
    except RuntimeError as e:  # the compiler's error lines first: its command lines say little
        errors = [line.strip() for line in str(e).splitlines() if "error" in line and not line.startswith("FAILED")]
        if not errors:
            raise
        raise RuntimeError("; ".join(errors[:3])) from None


def _cannot_take(fn, positional):
    """'' when fn can be called with that many positional arguments, else its signature."""
    import inspect
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return ""  # no signature to check (a builtin, a C extension): the call will tell
    try:
        sig.bind(*([None] * positional))
    except TypeError:
        return str(sig)
    return ""


def _torch_ready():
    import sys
    torch = sys.modules.get("torch")
    spec = getattr(torch, "__spec__", None)
    return torch is not None and not getattr(spec, "_initializing", False)


def _watch_triton_compiles():
    """Once Triton is imported: each compile's time as Triton's compiler accounts for it (IR made, lowering
    stages, results stored; a compile found in Triton's cache too) added to the bridge's count, with any
    listener set before still called. True once installed."""
    import sys
    knobs = getattr(sys.modules.get("triton"), "knobs", None)
    compilation = getattr(knobs, "compilation", None)
    if compilation is None or not hasattr(compilation, "listener"):
        return False  # (not imported, or a Triton without the listener: its compiles stay in "kernel runs")
    before = compilation.listener

    def listener(*args, **kwargs):
        try:  # (never a failure of the compile it is told of)
            _note_compile_us(int(getattr(kwargs.get("times"), "total", 0) or 0))
        except Exception:
            pass
        if before is not None:
            before(*args, **kwargs)

    compilation.listener = listener
    return True
)PY";

// Nanoseconds this process spent loading Python kernels (their files imported on a first call) and in
// Triton's compiler (Bridge::load_seconds). Atomic: kernels load under the GIL, but it is read without it.
std::atomic<uint64_t>& load_ns() {
  static std::atomic<uint64_t> ns{0};
  return ns;
}

double load_seconds() { return static_cast<double>(load_ns().load(std::memory_order_relaxed)) / 1e9; }

py::object& bbshim_module() {
  static py::object* m = nullptr;  // never destroyed: it would outlive the interpreter at exit
  if (!m) {
    py::object module = py::module_::import("types").attr("ModuleType")("bbshim");
    py::exec(kModuleSource, module.attr("__dict__"));
    module.attr("_note_compile_us") = py::cpp_function(
        [](int64_t us) { load_ns().fetch_add(static_cast<uint64_t>(std::max<int64_t>(us, 0)) * 1000); });
    py::dict modules = py::module_::import("sys").attr("modules");
    if (!modules.contains("bbshim")) modules["bbshim"] = module;
    m = new py::object(module);
  }
  return *m;
}

// "aten::relu", "aten::relu.default", "relu", "relu.default" -> "aten::relu".
std::string normalized(std::string op) {
  if (op.find("::") == std::string::npos) op = "aten::" + op;
  const std::string dflt = ".default";
  if (op.size() > dflt.size() && op.compare(op.size() - dflt.size(), dflt.size(), dflt) == 0)
    op.resize(op.size() - dflt.size());
  return op;
}

// BackendBench's .cpp/.cu form (bbshim's _load_inline), not a Python file.
bool built_by_load_inline(const std::string& file) {
  auto ends = [&file](const std::string& ext) {
    return file.size() > ext.size() && file.compare(file.size() - ext.size(), ext.size(), ext) == 0;
  };
  return ends(".cpp") || ends(".cu");
}

std::string python_error(py::error_already_set& e) {
  std::string type = py::str(e.type().attr("__name__"));
  std::string text = py::str(e.value());
  return text.empty() ? type : type + ": " + text;
}

c10::TypePtr element(const c10::TypePtr& t) {
  if (auto opt = t->cast<c10::OptionalType>()) return opt->getElementType();
  return t;
}

py::object to_python(const c10::IValue& v, const c10::Argument& arg) {
  if (v.isNone()) return py::none();
  const c10::TypePtr t = element(arg.real_type());
  if (t->kind() == c10::TypeKind::ScalarTypeType)
    return py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(torch::getTHPDtype(v.toScalarType())));
  if (t->kind() == c10::TypeKind::LayoutType)
    return py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(torch::getTHPLayout(v.toLayout())));
  if (t->kind() == c10::TypeKind::MemoryFormatType)
    return py::reinterpret_borrow<py::object>(torch::utils::getTHPMemoryFormat(v.toMemoryFormat()));
  return torch::jit::toPyObject(v);
}

bool is_default(const c10::Argument& arg, const c10::IValue& v) {
  return arg.default_value().has_value() && *arg.default_value() == v;
}

std::string returns_text(const c10::FunctionSchema& s) {
  std::ostringstream out;
  out << "(";
  for (size_t k = 0; k < s.returns().size(); ++k) out << (k ? ", " : "") << s.returns()[k].type()->str();
  return out.str() + ")";
}

struct PythonKernel final : c10::OperatorKernel {
  explicit PythonKernel(KernelSpec s) : spec(std::move(s)) {}

  KernelSpec spec;
  bool tried = false;        // (under the GIL)
  bool torch_ready = false;  // torch's import was seen done (it stays so: asked until then, under the GIL)
  std::string problem;       // why the files give no usable kernel
  py::object* fn = nullptr;  // never destroyed, like the module
  py::object* decline = nullptr;

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, Stack* stack) {
    if (!Py_IsInitialized()) throw std::runtime_error("no Python interpreter is running in this process");
    std::string failure;
    bool declined = false;
    {
      py::gil_scoped_acquire gil;
      try {
        if (!torch_ready && !(torch_ready = bbshim_module().attr("_torch_ready")().cast<bool>())) {
          declined = true;  // a kernel file imports torch: not before the program's own import is done
          failure = "torch is still being imported";
        } else {
          load(op.schema());
          if (problem.empty()) call(op.schema(), stack);
        }
      } catch (py::error_already_set& e) {
        declined = decline && e.matches(*decline);
        failure = declined ? std::string(py::str(e.value())) : python_error(e);
        if (failure.empty()) failure = "(no reason given)";
      }
    }
    if (declined) throw bb::Decline(failure);
    if (!problem.empty()) throw std::runtime_error(problem);
    if (!failure.empty()) throw std::runtime_error(failure);
  }

  // The files imported and the kernel found (once), timed for Bridge::load_seconds: the import's time less
  // the Triton compiles inside it (the listener counts those), and the listener set up once Triton is in
  // the process (the first load after it was imported).
  void load(const c10::FunctionSchema& schema) {
    if (tried) return;
    tried = true;
    const auto start = std::chrono::steady_clock::now();
    const uint64_t counted = load_ns().load();
    import_files(schema);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
    const uint64_t inside = load_ns().load() - counted;
    if (static_cast<uint64_t>(ns.count()) > inside) load_ns().fetch_add(static_cast<uint64_t>(ns.count()) - inside);
    static bool watching = false;  // (under the GIL)
    if (!watching) try {
        watching = bbshim_module().attr("_watch_triton_compiles")().cast<bool>();
      } catch (const std::exception&) {  // (py::error_already_set, a cast error: the compiles stay uncounted)
      }
  }

  void import_files(const c10::FunctionSchema& schema) {
    py::object& m = bbshim_module();
    decline = new py::object(m.attr("Decline"));
    std::vector<py::object> registered;
    for (size_t k = 0; k < spec.files.size(); ++k) {
      const std::string& file = spec.files[k];
      py::tuple r;
      try {
        r = m.attr("_import")(file, spec.module_prefix + std::to_string(k), spec.import_timeout_s).cast<py::tuple>();
      } catch (py::error_already_set& e) {
        problem = file + (built_by_load_inline(file) ? ": cannot build it (load_inline): " : ": cannot import it: ") +
                  python_error(e);
        return;
      }
      const std::string printed = py::str(r[1]);
      if (!printed.empty() && spec.warn)
        spec.warn(file + " printed " + std::to_string(printed.size()) +
                  " characters to stdout while importing (kept from the program's output)");
      py::object module = r[0];
      if (!spec.symbol.empty()) {
        if (!py::hasattr(module, spec.symbol.c_str())) {
          problem = file + ": no function named " + spec.symbol +
                    " (BackendBench's layout: <folder>/<folder>_implementation*.py exports <folder>_kernel_impl; "
                    "a .cpp/.cu pair defines <folder>)";
          return;
        }
        registered.push_back(module.attr(spec.symbol.c_str()));
        continue;
      }
      for (const auto& item : r[2].cast<py::list>()) {
        py::tuple pair = item.cast<py::tuple>();
        const std::string name = py::str(pair[0]);
        if (normalized(name) == spec.op) {
          registered.push_back(pair[1]);
        } else if (spec.warn) {
          spec.warn(file + ": @bbshim.kernel(\"" + name + "\") in the folder for " + spec.op + " is ignored");
        }
      }
    }
    if (registered.empty()) {
      problem = (spec.files.size() == 1 ? spec.files[0] : "the folder's Python files") +
                std::string(": no kernel registered for ") + spec.op + " (decorate a function with @bbshim.kernel(\"" +
                spec.op + "\"))";
      return;
    }
    if (registered.size() > 1 && spec.warn)
      spec.warn(spec.op + ": " + std::to_string(registered.size()) + " Python kernels registered; the first is used");
    py::object f = registered.front();
    if (!PyCallable_Check(f.ptr())) {
      problem = spec.files.front() + ": " + (spec.symbol.empty() ? spec.op : spec.symbol) + " is not callable";
      return;
    }
    size_t required = 0;
    for (const auto& a : schema.arguments()) required += !a.kwarg_only() && !a.default_value().has_value();
    const std::string sig = m.attr("_cannot_take")(f, required).cast<std::string>();
    if (!sig.empty()) {
      std::ostringstream s;
      s << spec.files.front() << ": " << (spec.symbol.empty() ? "the kernel" : spec.symbol) << sig
        << " cannot take the " << required << " positional arguments of " << schema;
      problem = s.str();
      return;
    }
    fn = new py::object(f);
  }

  void call(const c10::FunctionSchema& schema, Stack* stack) {
    const auto& params = schema.arguments();
    const size_t n = params.size();
    const auto args = torch::jit::last(*stack, n);
    size_t positional = 0;
    while (positional < n && !params[positional].kwarg_only()) ++positional;
    size_t passed = positional;
    while (passed > 0 && is_default(params[passed - 1], args[passed - 1])) --passed;
    py::tuple pargs(passed);
    for (size_t k = 0; k < passed; ++k) pargs[k] = to_python(args[k], params[k]);
    py::dict kwargs;
    for (size_t k = positional; k < n; ++k)
      if (!is_default(params[k], args[k])) kwargs[params[k].name().c_str()] = to_python(args[k], params[k]);
    // (no keyword arguments, the common case: the tuple as it is, without unpacking into a new one)
    PyObject* got = PyObject_Call(fn->ptr(), pargs.ptr(), kwargs.empty() ? nullptr : kwargs.ptr());
    if (!got) throw py::error_already_set();
    py::object out = py::reinterpret_steal<py::object>(got);
    std::vector<c10::IValue> results;
    const auto& rets = schema.returns();
    try {
      if (rets.size() == 1) {
        results.push_back(torch::jit::toIValue(out, rets[0].real_type()));
      } else if (!rets.empty()) {
        if (!py::isinstance<py::tuple>(out) && !py::isinstance<py::list>(out)) throw std::runtime_error("not a tuple");
        py::sequence items = out.cast<py::sequence>();
        if (items.size() != rets.size()) throw std::runtime_error(std::to_string(items.size()) + " values");
        for (size_t k = 0; k < rets.size(); ++k) results.push_back(torch::jit::toIValue(items[k], rets[k].real_type()));
      }
    } catch (const py::error_already_set&) {
      throw;
    } catch (const std::exception& e) {
      std::string got = py::str(py::repr(py::type::of(out)));
      throw std::runtime_error("the kernel returned " + got + ", the op returns " + returns_text(schema) + " (" +
                               std::string(e.what()).substr(0, 200) + ")");
    }
    torch::jit::drop(*stack, n);
    for (auto& r : results) stack->push_back(std::move(r));
  }
};

const abi::Kernel* make_kernel(const KernelSpec& spec, const c10::FunctionSchema& schema) {
  // The names live as long as the kernel: for the life of the process, like a C++ backend's library.
  const char* op = (new std::string(spec.op))->c_str();
  const char* file = (new std::string(spec.files.empty() ? "" : spec.files.front()))->c_str();
  return new abi::Kernel{op, file, c10::KernelFunction::makeFromBoxedFunctor(std::make_unique<PythonKernel>(spec)),
                         schema, "Python"};
}

const Bridge kBridge{kBridgeVersion, &make_kernel, &load_seconds};

}  // namespace
}  // namespace bb::backends::python

extern "C" BB_ABI_EXPORT const bb::backends::python::Bridge* bb_python_bridge_v1() {
  return &bb::backends::python::kBridge;
}
