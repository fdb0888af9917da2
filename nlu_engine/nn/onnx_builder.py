"""The one way a network's parse graph is written: ``GraphBuilder``.

A network that parses (DIET, whole, ``classifiers/diet/onnx_graph.py``; the language
model's encoder, ``featurizers/dense/bert_onnx.py``) is written once, as an ONNX graph built in
memory from its named weights when a model loads; ONNX Runtime runs it (``onnx_runtime``).
Training stays in TensorFlow, and the tests check each graph against TensorFlow's outputs.

A new network's parse graph goes in its stage's folder, next to the component, as a function
``weights -> onnx.ModelProto`` written with this builder::

    g = GraphBuilder("my_network", matmul_dtype=...)
    x = g.input("x", FLOAT, ["batch", "length", width])
    h = g.dense(x, "hidden", kernel, bias)          # MatMul (+ Add), names its initializers
    h = g.gelu(g.layer_norm(h, "norm", gamma, beta, 1e-6))
    g.output(h, "states", FLOAT, ["batch", "length", units])
    model = g.model()

``matmul_dtype="bfloat16"`` rounds the inputs and the kernels of every product to bfloat16 (the
products sum in float32), as TensorFlow's bfloat16 dense layers do; everything else is float32.
``matmul_dtype="int8"`` writes every ``matmul`` as ONNX Runtime's ``MatMulNBits``: the kernel in
int8 with a float32 scale per block of ``INT8_BLOCK`` inputs of each output column, the input
quantised to int8 per block of as many values at each call (``accuracy_level`` 4), the products
summed in int32 (int8 dot products: VNNI) and scaled back per block. A scale per 32 values rather
than per tensor keeps the error about five times smaller than dynamic quantisation's (BENCHMARKS.md).
``matmul_dtype="int8_dynamic"`` writes every ``matmul`` as ONNX Runtime's ``DynamicQuantizeMatMul``:
the kernel in int8 with a float32 scale per output column, the input quantised to uint8 with one
scale and zero point per call (``DynamicQuantizeLinear``), the products summed in int32 by MLAS's
int8 GEMM (VNNI or AMX where the CPU has them) and scaled back per column: each product about
four times faster than float32's, for one message (a quarter of the weight bytes to read) as for a
batch, where block int8 is no faster than float32; but one scale per call for the input is
coarse. A product of a LayerNorm's output, whose few large channels would take up that one
scale, reads the normalised values instead (``normalised_matmul``: gamma folded into the kernel,
beta into the bias, the same product before rounding).
Kernels read by other operators (``kernel``, e.g. a fused ``Attention``'s) stay float32.
Importing this module imports ``onnx`` (a required dependency).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from nlu_engine.nn.onnx_runtime import MS_DOMAIN, model_of

FLOAT, INT32, INT64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64
MatmulDtype = Literal["float32", "bfloat16", "int8", "int8_dynamic"]
#: the inputs a kernel's int8 scale (and the input's, at each call) covers under ``int8``
INT8_BLOCK = 32


def bfloat16_rounded(array: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 (ties to even), kept as float32."""
    bits = np.ascontiguousarray(array, np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & np.uint32(0xFFFF0000)
    return rounded.view(np.float32)


def int8_blocks(kernel: np.ndarray, block: int = INT8_BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """A kernel [I, O] as ``MatMulNBits`` keeps it: the uint8 codes [O, ceil(I / block), block]
    (int8 plus 128, the operator's implied zero point; the inputs past I padded with zeros) and a
    float32 scale per block [O * ceil(I / block)], the block's largest magnitude over 127."""
    inputs, outputs = kernel.shape
    blocks = -(-inputs // block)
    padded = np.zeros((blocks * block, outputs), np.float32)
    padded[:inputs] = kernel
    grouped = padded.T.reshape(outputs, blocks, block)  # [O, blocks, block]
    scale = np.abs(grouped).max(axis=-1) / 127.0
    scale[scale == 0] = 1.0
    codes = np.clip(np.rint(grouped / scale[..., None]), -127, 127) + 128
    return codes.astype(np.uint8), scale.reshape(-1).astype(np.float32)


def int8_columns(kernel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A kernel [I, O] as ``DynamicQuantizeMatMul`` reads it: int8 codes [I, O] (symmetric, zero
    point 0) and a float32 scale per output column [O], the column's largest magnitude over 127."""
    scale = np.abs(kernel).max(axis=0) / 127.0
    scale[scale == 0] = 1.0
    codes = np.clip(np.rint(kernel / scale), -127, 127)
    return codes.astype(np.int8), scale.astype(np.float32)


class GraphBuilder:
    """The nodes, initializers, inputs and outputs of one graph being written (module doc)."""

    def __init__(self, name: str, matmul_dtype: MatmulDtype = "float32") -> None:
        self.name = name
        self.matmul_dtype = matmul_dtype
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.inputs: list[Any] = []
        self.outputs: list[Any] = []
        self._names: set[str] = set()

    # --- declarations ---------------------------------------------------------------------------
    def input(self, name: str, dtype: int, shape: list[Any]) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, dtype, shape))
        return name

    def output(self, value: str, name: str, dtype: int, shape: list[Any]) -> str:
        """Declare ``value`` as the graph output ``name`` (an Identity when the names differ)."""
        if value != name:
            self.op("Identity", [value], name)
        self.outputs.append(helper.make_tensor_value_info(name, dtype, shape))
        return name

    def const(self, name: str, array: Any, dtype: Any = np.float32) -> str:
        """An initializer (once per name: the same name twice is the same tensor)."""
        if name not in self._names:
            self._names.add(name)
            self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array, dtype), name))
        return name

    def op(self, kind: str, inputs: list[str], output: str | list[str], domain: str = "",
           **attrs: Any) -> str:
        """A node named after its (first) output; returns that output."""
        outputs = [output] if isinstance(output, str) else output
        self.nodes.append(helper.make_node(kind, inputs, outputs, name=outputs[0], domain=domain, **attrs))
        return outputs[0]

    def ms(self, kind: str, inputs: list[str], output: str, **attrs: Any) -> str:
        """One of ONNX Runtime's own operators (``com.microsoft``: Attention, Gelu, ...)."""
        return self.op(kind, inputs, output, domain=MS_DOMAIN, **attrs)

    # --- layers ----------------------------------------------------------------------------------
    def product_input(self, x: str) -> str:
        """``x`` as a product reads it: rounded to bfloat16 under ``matmul_dtype="bfloat16"``."""
        if self.matmul_dtype != "bfloat16":
            return x
        rounded = self.op("Cast", [x], x + "_bf16", to=TensorProto.BFLOAT16)
        return self.op("Cast", [rounded], x + "_rounded", to=FLOAT)

    def kernel(self, name: str, array: np.ndarray) -> str:
        """A product's kernel initializer (bfloat16-rounded under ``matmul_dtype="bfloat16"``)."""
        array = np.asarray(array, np.float32)
        return self.const(name, bfloat16_rounded(array) if self.matmul_dtype == "bfloat16" else array)

    def matmul(self, x: str, name: str, kernel: np.ndarray, out: str) -> str:
        """x [..., I] @ kernel [I, O] -> [..., O]; the node is named ``out``."""
        if self.matmul_dtype == "int8_dynamic":
            return self._dynamic_int8(x, name, np.asarray(kernel, np.float32), None, out)
        if self.matmul_dtype == "int8":
            codes, scales = int8_blocks(np.asarray(kernel, np.float32))
            inputs, outputs = kernel.shape
            return self.ms("MatMulNBits", [x, self.const(name + "_int8", codes, np.uint8),
                                           self.const(name + "_scales", scales)], out,
                           K=inputs, N=outputs, bits=8, block_size=INT8_BLOCK, accuracy_level=4)
        return self.op("MatMul", [self.product_input(x), self.kernel(name, kernel)], out)

    def _dynamic_int8(self, x: str, name: str, kernel: np.ndarray, bias: np.ndarray | None, out: str) -> str:
        codes, scales = int8_columns(kernel)
        inputs = [x, self.const(name + "_int8", codes, np.int8), self.const(name + "_scales", scales)]
        if bias is not None:
            inputs += ["", self.const(name + "_bias", bias)]  # no zero point: symmetric
        return self.ms("DynamicQuantizeMatMul", inputs, out)

    def normalised_matmul(self, x: str, name: str, kernel: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
                          out: str) -> str:
        """``x @ kernel`` where ``x`` is a LayerNorm's output ``n * gamma + beta``. Under
        ``int8_dynamic`` the product reads ``n = (x - beta) / gamma``: ``n @ (gamma * kernel) +
        beta @ kernel``, the same product before rounding, so the few channels a large gamma or
        beta makes large do not take up the input's one int8 scale. Any other dtype (or a gamma
        with a zero): ``matmul``."""
        gamma, beta = np.asarray(gamma, np.float32), np.asarray(beta, np.float32)
        if self.matmul_dtype != "int8_dynamic" or not np.all(gamma != 0):
            return self.matmul(x, name, kernel, out)
        kernel = np.asarray(kernel, np.float32)
        centred = self.op("Sub", [x, self.const(name + "_beta", beta)], out + "_centred")
        inverse = self.const(name + "_inverse_gamma", 1.0 / gamma)
        normalised = self.op("Mul", [centred, inverse], out + "_normalised")
        return self._dynamic_int8(normalised, name, kernel * gamma[:, None], beta @ kernel, out)

    def dense(self, x: str, name: str, kernel: np.ndarray, bias: np.ndarray | None, out: str) -> str:
        """x @ kernel (+ bias)."""
        if bias is None:
            return self.matmul(x, name + "_kernel", kernel, out)
        product = self.matmul(x, name + "_kernel", kernel, out + "_product")
        return self.op("Add", [product, self.const(name + "_bias", bias)], out)

    def layer_norm(self, x: str, name: str, gamma: np.ndarray, beta: np.ndarray, epsilon: float,
                   out: str | None = None) -> str:
        """LayerNorm over the last axis."""
        inputs = [x, self.const(name + "_gamma", gamma), self.const(name + "_beta", beta)]
        return self.op("LayerNormalization", inputs, out or name + "_out", axis=-1, epsilon=epsilon)

    def gelu(self, x: str, out: str) -> str:
        """The exact (erf) gelu."""
        return self.ms("Gelu", [x], out)

    def embedding_bag(self, ids: str, values: str, positions: str, rows: str, table: str, bias: str,
                      out: str) -> str:
        """A sparse matrix's product with ``table`` [V, D], from its non-zero entries: ids [n]
        (column, int32/int64), values [n] and positions [n] (row, int32/int64), rows [1] (int64,
        the row count) -> [rows, D] = bias + Σ values · table[ids] at their positions (rows
        without entries get the bias [D]). A Gather of the entries' rows and a ScatterND that adds
        them up: the work follows the entries, not the vocabulary. ``table`` may be a graph
        input, so that a vocabulary-sized table is fed from its array rather than copied into
        each session."""
        op = self.op
        gathered = op("Gather", [table, ids], out + "_entries", axis=0)  # [n, D]
        axis = self.const("embedding_bag_axis", np.array([1]), np.int64)
        weighted = op("Mul", [gathered, op("Unsqueeze", [values, axis], out + "_values")], out + "_weighted")
        index = op("Unsqueeze", [op("Cast", [positions], out + "_positions", to=INT64), axis], out + "_index")
        size = op("Concat", [rows, op("Shape", [bias], out + "_width")], out + "_size", axis=0)
        base = op("Expand", [bias, size], out + "_base")  # [rows, D]
        return op("ScatterND", [base, index, weighted], out, reduction="add")

    def model(self) -> Any:
        """The graph as an ``onnx.ModelProto`` ONNX Runtime reads."""
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.initializers)
        return model_of(graph)
