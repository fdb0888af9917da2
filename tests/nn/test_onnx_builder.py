"""The one graph builder (``nn.onnx_builder``): its layers compute what they say, its bfloat16
products round as TensorFlow's bfloat16 layers do, and its int8 products (block and dynamic) stay
close to float32."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from nlu_engine.nn.onnx_builder import (
    FLOAT,
    INT8_BLOCK,
    INT32,
    INT64,
    GraphBuilder,
    bfloat16_rounded,
    int8_blocks,
    int8_columns,
)
from nlu_engine.nn.onnx_runtime import session


def run(builder: GraphBuilder, **feeds: np.ndarray) -> np.ndarray:
    return session(builder.model(), 1).run(None, feeds)[0]  # type: ignore[no-any-return]


def test_bfloat16_rounding_is_tensorflows() -> None:
    values = np.random.default_rng(0).normal(size=1000).astype(np.float32) * 100
    expected = tf.cast(tf.cast(values, tf.bfloat16), tf.float32).numpy()
    np.testing.assert_array_equal(bfloat16_rounded(values), expected)


def test_dense_layer_norm_and_gelu_compute_their_formulas() -> None:
    rng = np.random.default_rng(1)
    kernel, bias = rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=3).astype(np.float32)
    gamma, beta = rng.normal(size=3).astype(np.float32), rng.normal(size=3).astype(np.float32)
    g = GraphBuilder("test")
    x = g.input("x", FLOAT, ["rows", 4])
    h = g.gelu(g.layer_norm(g.dense(x, "d", kernel, bias, "dense"), "n", gamma, beta, 1e-6), "gelu")
    g.output(h, "y", FLOAT, ["rows", 3])
    inputs = rng.normal(size=(5, 4)).astype(np.float32)
    dense = tf.constant(inputs) @ kernel + bias
    norm = tf.keras.layers.LayerNormalization(epsilon=1e-6, gamma_initializer=tf.constant_initializer(gamma),
                                              beta_initializer=tf.constant_initializer(beta))
    expected = tf.nn.gelu(norm(dense))
    np.testing.assert_allclose(run(g, x=inputs), expected.numpy(), atol=1e-5)


def test_bfloat16_products_match_tensorflows_bfloat16_matmul() -> None:
    rng = np.random.default_rng(2)
    kernel = rng.normal(size=(16, 8)).astype(np.float32)
    inputs = rng.normal(size=(6, 16)).astype(np.float32)
    g = GraphBuilder("test", matmul_dtype="bfloat16")
    g.output(g.matmul(g.input("x", FLOAT, ["rows", 16]), "w", kernel, "product"), "y", FLOAT, ["rows", 8])
    product = tf.matmul(tf.cast(inputs, tf.bfloat16), tf.cast(kernel, tf.bfloat16))
    expected = tf.cast(product, tf.float32).numpy()
    got = run(g, x=inputs)
    np.testing.assert_allclose(got, expected, rtol=2e-2, atol=2e-2)  # TensorFlow rounds the sum too
    exact = inputs @ kernel
    assert np.abs(got - exact).max() > 1e-4  # the rounding did happen
    np.testing.assert_allclose(got, bfloat16_rounded(inputs) @ bfloat16_rounded(kernel), rtol=1e-5, atol=1e-5)


def test_an_initializer_named_twice_is_one_tensor() -> None:
    g = GraphBuilder("test")
    assert g.const("w", np.ones(2)) == g.const("w", np.zeros(2)) == "w"
    assert len(g.initializers) == 1


def test_int8_blocks_keep_each_weight_within_half_a_step_of_its_blocks_scale() -> None:
    kernel = np.random.default_rng(3).normal(size=(40, 5)).astype(np.float32)  # 40: a padded block
    codes, scales = int8_blocks(kernel)
    assert codes.shape == (5, 2, INT8_BLOCK) and codes.dtype == np.uint8 and scales.shape == (10,)
    restored = ((codes.astype(np.float32) - 128) * scales.reshape(5, 2, 1)).reshape(5, -1)[:, :40].T
    step = np.repeat(scales.reshape(5, 2), INT8_BLOCK, axis=1)[:, :40].T
    assert np.all(np.abs(restored - kernel) <= step / 2 + 1e-7)
    assert np.all(codes[:, 1, 40 - INT8_BLOCK:] == 128)  # the padding is zero


def test_int8_products_stay_within_a_percent_of_float32() -> None:
    rng = np.random.default_rng(4)
    kernel = rng.normal(size=(96, 24)).astype(np.float32)
    inputs = rng.normal(size=(3, 7, 96)).astype(np.float32)
    g = GraphBuilder("test", matmul_dtype="int8")
    product = g.matmul(g.input("x", FLOAT, ["b", "t", 96]), "w", kernel, "product")
    g.output(product, "y", FLOAT, ["b", "t", 24])
    assert [n.op_type for n in g.nodes] == ["MatMulNBits", "Identity"]
    got, exact = run(g, x=inputs), inputs @ kernel
    assert got.shape == exact.shape
    relative = np.abs(got - exact).max() / np.abs(exact).max()
    assert 1e-6 < relative < 0.01  # quantised, and close
    # each row is quantised on its own: a row alone gives what it gives in the batch
    np.testing.assert_allclose(run(g, x=inputs[1:2, 2:3]), got[1:2, 2:3], atol=1e-5)


def test_int8_columns_keep_each_weight_within_half_a_step_of_its_columns_scale() -> None:
    kernel = np.random.default_rng(5).normal(size=(40, 6)).astype(np.float32)
    kernel[:, 3] = 0.0  # an all-zero column keeps a usable scale
    codes, scales = int8_columns(kernel)
    assert codes.shape == (40, 6) and codes.dtype == np.int8 and scales.shape == (6,)
    assert np.all(np.abs(codes.astype(np.float32) * scales - kernel) <= scales / 2 + 1e-7)
    assert np.abs(codes).max() == 127 and scales[3] == 1.0 and not codes[:, 3].any()


def _dynamic(build: str, kernel: np.ndarray, **norm: np.ndarray) -> GraphBuilder:
    g = GraphBuilder("test", matmul_dtype=build)  # type: ignore[arg-type]
    x = g.input("x", FLOAT, ["b", "t", kernel.shape[0]])
    product = g.normalised_matmul(x, "w", kernel, norm["gamma"], norm["beta"], "p") if norm else \
        g.matmul(x, "w", kernel, "p")
    g.output(product, "y", FLOAT, ["b", "t", kernel.shape[1]])
    return g


def test_dynamic_int8_products_stay_within_a_few_percent_of_float32() -> None:
    rng = np.random.default_rng(6)
    kernel = rng.normal(size=(96, 24)).astype(np.float32)
    inputs = rng.normal(size=(3, 7, 96)).astype(np.float32)
    g = _dynamic("int8_dynamic", kernel)
    assert [n.op_type for n in g.nodes] == ["DynamicQuantizeMatMul", "Identity"]
    got, exact = run(g, x=inputs), inputs @ kernel
    relative = np.abs(got - exact).max() / np.abs(exact).max()
    assert 1e-5 < relative < 0.03  # quantised, and close


def test_a_layer_norms_output_is_read_normalised_under_dynamic_int8_only() -> None:
    rng = np.random.default_rng(7)
    kernel = rng.normal(size=(64, 16)).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, 64).astype(np.float32)
    beta = rng.normal(0, 0.1, 64).astype(np.float32)
    gamma[5], beta[9] = 30.0, -20.0  # two large channels, as a trained LayerNorm has,
    kernel[[5, 9]] *= 0.05  # which the next product reads with small weights
    inputs = (rng.normal(size=(2, 5, 64)) * gamma + beta).astype(np.float32)
    exact = inputs @ kernel
    for build in ("float32", "bfloat16", "int8"):  # the plain product, node for node
        normalised = _dynamic(build, kernel, gamma=gamma, beta=beta)
        plain = _dynamic(build, kernel)
        assert normalised.model().SerializeToString() == plain.model().SerializeToString()
    g = _dynamic("int8_dynamic", kernel, gamma=gamma, beta=beta)
    assert [n.op_type for n in g.nodes] == ["Sub", "Mul", "DynamicQuantizeMatMul", "Identity"]
    error = np.linalg.norm(run(g, x=inputs) - exact) / np.linalg.norm(exact)
    plain = np.linalg.norm(run(_dynamic("int8_dynamic", kernel), x=inputs) - exact) / np.linalg.norm(exact)
    assert error < 0.02 and error < plain / 3  # the large channels no longer set the input's scale
    gamma[3] = 0.0  # a zero gamma cannot be divided by: the plain product
    assert [n.op_type for n in _dynamic("int8_dynamic", kernel, gamma=gamma, beta=beta).nodes] == [
        "DynamicQuantizeMatMul", "Identity"]


def test_embedding_bag_is_the_sparse_product_plus_bias() -> None:
    import scipy.sparse

    rng = np.random.default_rng(3)
    table, bias = rng.normal(size=(50, 6)).astype(np.float32), rng.normal(size=6).astype(np.float32)
    dense = scipy.sparse.random(7, 50, density=0.2, random_state=4, dtype=np.float32).toarray()
    dense[2] = 0  # a row without entries gets the bias alone
    matrix = scipy.sparse.csr_matrix(dense)
    coo = matrix.tocoo()
    g = GraphBuilder("test")
    kinds = (("ids", INT32), ("values", FLOAT), ("positions", INT32))
    inputs = [g.input(n, t, ["entries"]) for n, t in kinds]
    rows = g.input("rows", INT64, [1])
    g.input("table", FLOAT, ["vocabulary", 6])  # fed, as DIET feeds its tables
    bag = g.embedding_bag(*inputs, rows, "table", g.const("bias", bias), "bag_out")
    g.output(bag, "y", FLOAT, ["rows", 6])
    order = rng.permutation(coo.nnz)  # the entries in any order: several per row add up
    got = run(g, ids=coo.col[order].astype(np.int32), values=coo.data[order],
              positions=coo.row[order].astype(np.int32), rows=np.array([7]), table=table)
    np.testing.assert_allclose(got, matrix @ table + bias, rtol=1e-5, atol=1e-5)
    assert len(set(coo.row.tolist())) < coo.nnz  # rows with more than one entry were summed
    empty = run(g, ids=np.zeros(0, np.int32), values=np.zeros(0, np.float32),
                positions=np.zeros(0, np.int32), rows=np.array([3]), table=table)
    np.testing.assert_array_equal(empty, np.tile(bias, (3, 1)))
