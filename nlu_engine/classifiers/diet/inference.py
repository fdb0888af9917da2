"""DIET's prediction: its input layers and heads in NumPy, its transformer under ONNX Runtime.

The same network as ``model.py`` without dropout, read top to bottom. It runs on the named
weights ``DIETNetwork.export_weights`` produces (kernels with their connection masks applied),
so loading a model and parsing never imports TensorFlow: a server starts fast, stays small,
and a single message does not pay a graph call's fixed overhead. The weight names are
``weight_names``'s.

    sparse features ─► csr @ kernel (+ bias) ─► [dense features] ─► (unify) ─► [B, T+1, D]
    ─► text_hidden ─► transformer (pre-LN, relative attention) ─► gelu ─► h [B, T+1, U]
    intent: text_embed(h[b, len_b]) · label embeddings [N, E]          -> similarities [B, N]
    tags:   logits [B, T, K] ─► constrained Viterbi + forward-backward -> tags, confidences

The transformer (the bulk of a message's time) is written once, as an ONNX graph
(``onnx_graph.py``), and runs as one ONNX Runtime call; the sparse input products (a lookup
and a sum per position), the small dense heads and the CRF's decoding stay here.

Shapes: B batch, T tokens, D feature width, U transformer units, H heads, d = U / H,
R max_relative_position, N labels, E embedding dimension, K tags.
"""

from __future__ import annotations

import numpy as np

from nlu_engine.classifiers.diet import onnx_graph
from nlu_engine.classifiers.diet import weight_names as names
from nlu_engine.classifiers.diet.spec import NetworkParams
from nlu_engine.contract.threads import single_blas_thread
from nlu_engine.nn.attention import mask_bias, relative_positions
from nlu_engine.nn.ops import gelu
from nlu_engine.training_data.bilou import bilou_constraints

_FORBIDDEN = -1e4  # score of a transition / first / last tag BILOU forbids (as crf.py)


# --- CRF ----------------------------------------------------------------------------------------
def viterbi(logits: np.ndarray, transitions: np.ndarray, transposed: bool = False) -> np.ndarray:
    """Best tag path of one sequence: logits [n, K], transitions [K, K] -> tags [n].

    ``transposed``: ``transitions`` is given as [K_next, K_prev] (then each step's max over the
    previous tag runs along contiguous rows, faster than along columns for large tag sets).
    """
    n = logits.shape[0]
    to_from = transitions if transposed else np.ascontiguousarray(transitions.T)  # [K_next, K_prev]
    delta = logits[0]  # [K]
    back = np.zeros((n, logits.shape[1]), np.intp)
    rows = np.arange(logits.shape[1])
    for t in range(1, n):
        scores = to_from + delta  # [K_next, K_prev]
        back[t] = scores.argmax(1)
        delta = scores[rows, back[t]] + logits[t]
    tags = np.zeros(n, np.intp)
    tags[-1] = int(delta.argmax())
    for t in range(n - 1, 0, -1):
        tags[t - 1] = back[t, tags[t]]
    return tags


def marginals(
    logits: np.ndarray, transitions: np.ndarray, exp_transitions: tuple[np.ndarray, float] | None = None
) -> np.ndarray:
    """p(y_t = k | x) of one sequence by forward-backward: logits [n, K], W [K, K] -> [n, K].

    Each step's log-sum-exp over the previous (next) tag is a [K] x [K, K] product in shifted
    exp space: logsumexp_i(a_i + W_ij) = m + M + log(sum_i exp(a_i - m) exp(W_ij - M)).
    Forbidden transitions (-1e4) become exact zeros there. ``exp_transitions`` may pass
    (exp(W - max W), max W) precomputed.
    """
    n, k = logits.shape
    if exp_transitions is None:
        shift = transitions.max()
        exp_w = np.exp(transitions - shift)  # [K, K]
    else:
        exp_w, shift = exp_transitions
    alpha = np.empty((n, k))
    beta = np.zeros((n, k))
    alpha[0] = logits[0]
    for t in range(1, n):
        m = alpha[t - 1].max()
        summed = np.exp(alpha[t - 1] - m) @ exp_w  # [K]: sum over the previous tag
        alpha[t] = np.log(np.maximum(summed, 1e-300)) + m + shift + logits[t]
    for t in range(n - 2, -1, -1):
        after = logits[t + 1] + beta[t + 1]  # [K]
        m = after.max()
        summed = exp_w @ np.exp(after - m)  # [K]: sum over the next tag
        beta[t] = np.log(np.maximum(summed, 1e-300)) + m + shift
    top = alpha[-1].max()
    log_z = top + np.log(np.exp(alpha[-1] - top).sum())
    return np.exp(alpha + beta - log_z)


class CRFDecoder:
    """A tag set's transitions with the BILOU penalties folded in; decodes one sequence."""

    def __init__(self, transitions: np.ndarray, constraints: tuple | None) -> None:
        k = transitions.shape[0]
        if constraints:
            allowed, start, end = constraints
            self.transitions = transitions + np.where(allowed, 0.0, _FORBIDDEN).astype(np.float32)
            self.start = np.where(start, 0.0, _FORBIDDEN).astype(np.float32)  # [K]
            self.end = np.where(end, 0.0, _FORBIDDEN).astype(np.float32)  # [K]
        else:
            self.transitions = transitions
            self.start = self.end = np.zeros(k, np.float32)
        # what every decode needs, computed once: W transposed in float32 for Viterbi (its
        # max/argmax are exact in float32), W in float64 and exp(W - max W) for the marginals
        self._to_from = np.ascontiguousarray(self.transitions.T, dtype=np.float32)  # [K, K]
        self._w64 = self.transitions.astype(np.float64)  # [K, K]
        self._shift = float(self._w64.max())
        self._exp_w = np.exp(self._w64 - self._shift)  # [K, K]

    def decode(self, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """logits [n, K] of one sequence -> tags [n] and each tag's marginal probability [n]."""
        logits = logits.astype(np.float64)  # 160 tags x a few steps: precision is free here
        logits[0] += self.start
        logits[-1] += self.end
        tags = viterbi(logits.astype(np.float32), self._to_from, transposed=True)
        probabilities = marginals(logits, self._w64, (self._exp_w, self._shift))  # [n, K]
        return tags, probabilities[np.arange(len(tags)), tags].astype(np.float32)


# --- the network --------------------------------------------------------------------------------
class DIETInference:
    """DIET's prediction from named weights: ``predict_batch`` as ``DIETNetwork.predict_batch``.

    ``weights`` maps the names of ``DIETNetwork.export_weights`` to float32 arrays; ``params``
    are the network's hyperparameters (``spec.NetworkParams``); ``tag_vocabularies`` name the
    CRF tag sets ("entity", "role", "group") and ``bilou`` says whether BILOU constraints apply.
    """

    def __init__(
        self,
        weights: dict[str, np.ndarray],
        params: NetworkParams,
        label_features: np.ndarray,
        tag_vocabularies: dict[str, list[str]],
        bilou: bool,
    ) -> None:
        self.w = {k: np.asarray(v, np.float32) for k, v in weights.items()}
        self.params = params
        self.num_layers = params.number_of_transformer_layers
        self.num_heads = params.number_of_attention_heads
        self.units = params.transformer_size
        self.max_relative = params.max_relative_position or 0
        self.unidirectional = params.unidirectional_encoder
        self.similarity_type = params.similarity_type
        self.unify = names.kernel(names.hidden(names.SEQ_UNIFY, 0)) in self.w
        # Ffnn stacks: name -> number of hidden layers (fixed by the weights)
        self.depth = {
            stack: _stack_depth(self.w, stack)
            for stack in (names.SEQ_UNIFY, names.SENT_UNIFY, names.TEXT_HIDDEN, names.LABEL_HIDDEN)
        }
        k = np.arange(self.units)
        self._angle_rates = (1.0 / np.power(10000.0, 2 * (k // 2) / self.units)).astype(np.float32)
        self._even = k % 2 == 0
        self.intents = (
            params.intent_classification and label_features.shape[0] > 0
            and names.kernel(names.TEXT_EMBED) in self.w
        )
        self.label_embeddings = self._label_embeddings(label_features) if self.intents else None
        self.layers = [names.TransformerLayer(i) for i in range(self.num_layers)]
        if self.num_layers:  # before ONNX Runtime sees them: it only checks shapes as it runs
            rows = self.max_relative + (0 if self.unidirectional else self.max_relative) + 1
            check_transformer(self.w, self.layers, self.num_heads, self.units, rows)
        self.relative = any(
            layer.key_relative in self.w or layer.value_relative in self.w for layer in self.layers
        )
        self.onnx = (  # DIET's transformer under ONNX Runtime (onnx_graph.py)
            onnx_graph.OnnxTransformer(self.w, self.layers, self.num_heads, self.units)
            if self.num_layers else None
        )
        self.decoders = {
            kind: CRFDecoder(self.w[names.transitions(kind)], bilou_constraints(v) if bilou else None)
            for kind, v in tag_vocabularies.items()
        }

    def _dense(self, name: str, x: np.ndarray, activation: bool = False) -> np.ndarray:
        """x [..., I] @ kernel [I, O] (+ bias) -> [..., O]."""
        y = x @ self.w[names.kernel(name)]
        bias = self.w.get(names.bias(name))
        if bias is not None:
            y = y + bias
        return gelu(y) if activation else y

    def _ffnn(self, name: str, x: np.ndarray) -> np.ndarray:
        for i in range(self.depth[name]):
            x = self._dense(names.hidden(name, i), x, activation=True)
        return x

    def _label_embeddings(self, label_features: np.ndarray) -> np.ndarray:
        x = self._dense(names.LABEL_DENSE, label_features.astype(np.float32))  # [N, Dl]
        x = self._ffnn(names.LABEL_HIDDEN, x)
        return self._dense(names.LABEL_EMBED, x)  # [N, E]

    # --- input ----------------------------------------------------------------------------
    def _bag(self, name: str, ids, values, positions, rows: int) -> np.ndarray:
        """Sparse entries (ids, values at positions) times the kernel: [rows, units]."""
        kernel = self.w[names.kernel(name)]  # [V, units]
        out = np.zeros((rows, kernel.shape[1]), np.float32)
        if len(ids):
            order = np.argsort(positions, kind="stable")  # batches come sorted: a no-op then
            positions, ids, values = positions[order], ids[order], values[order]
            entries = kernel[ids] * values.astype(np.float32)[:, None]  # [nnz, units]
            starts = np.flatnonzero(np.r_[True, positions[1:] != positions[:-1]])
            out[positions[starts]] = np.add.reduceat(entries, starts, axis=0)  # sum per position
        return out + self.w[names.bias(name)]

    def encode_text(self, batch: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Combined input features x [B, T+1, D] and the mask of real positions [B, T+1]."""
        size, max_len = (int(v) for v in batch["shape"])
        lengths = batch["lengths"]  # [B]
        token_mask = (np.arange(max_len)[None, :] < lengths[:, None]).astype(np.float32)  # [B, T]
        parts_seq, parts_sent = [], []
        if names.kernel(names.SEQ_BAG) in self.w:
            seq = self._bag(names.SEQ_BAG, batch["seq_ids"], batch["seq_values"], batch["seq_positions"],
                            size * max_len)  # [B*T, Dt]
            parts_seq.append(seq.reshape(size, max_len, -1))
        if "dense_seq" in batch:
            parts_seq.append(batch["dense_seq"].astype(np.float32))  # [B, T, Dd]
        if names.kernel(names.SENT_BAG) in self.w:
            parts_sent.append(self._bag(names.SENT_BAG, batch["sent_ids"], batch["sent_values"],
                                        batch["sent_positions"], size))  # [B, Dt]
        if "dense_sent" in batch:
            parts_sent.append(batch["dense_sent"].astype(np.float32))  # [B, Dd']
        x_seq = np.concatenate(parts_seq, -1)  # [B, T, Ds]
        if self.unify:
            x_seq = self._ffnn(names.SEQ_UNIFY, x_seq)  # [B, T, C]
        x_seq = x_seq * token_mask[:, :, None]
        x = np.concatenate([x_seq, np.zeros((size, 1, x_seq.shape[-1]), np.float32)], 1)  # [B, T+1, D]
        if parts_sent:
            x_sent = np.concatenate(parts_sent, -1)  # [B, Ds']
            if self.unify:
                x_sent = self._ffnn(names.SENT_UNIFY, x_sent)  # [B, C]
            x[np.arange(size), lengths] += x_sent  # the sentence slot right after the last token
        x = self._ffnn(names.TEXT_HIDDEN, x)  # [B, T+1, D]
        mask = (np.arange(max_len + 1)[None, :] < (lengths + 1)[:, None]).astype(np.float32)
        return x, mask

    # --- transformer ----------------------------------------------------------------------
    def transform(self, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """x [B, L, D], mask [B, L] -> gelu(transformer(x)) [B, L, U]."""
        if self.num_layers == 0:
            return x
        length = x.shape[1]
        angles = np.arange(length, dtype=np.float32)[:, None] * self._angle_rates[None]  # [L, U]
        position = np.where(self._even[None], np.sin(angles), np.cos(angles))  # [L, U]
        bias = mask_bias(mask, causal=self.unidirectional)  # [B, 1, 1|L, L]
        index = (
            relative_positions(length, self.max_relative, self.unidirectional) if self.relative else None
        )  # [L, L]
        assert self.onnx is not None  # built with the layers
        return self.onnx(x, bias, position, index)

    def probe(self, seq_vocab: int, sent_vocab: int, dense_seq: int, dense_sent: int) -> None:
        """One message of one token through the network (a model loading checks its weights so):
        ValueError, IndexError or KeyError when the weights do not fit together or the
        vocabularies and dense widths."""
        batch: dict[str, np.ndarray] = {"shape": np.array([1, 1], np.int32), "lengths": np.ones(1, np.int32)}
        for kind, vocab in (("seq", seq_vocab), ("sent", sent_vocab)):
            ids = np.array([vocab - 1] if vocab > 0 else [], np.int64)  # the last row of the table
            batch[f"{kind}_ids"], batch[f"{kind}_values"] = ids, np.ones(len(ids), np.float32)
            batch[f"{kind}_positions"] = np.zeros(len(ids), np.int64)
        if dense_seq:
            batch["dense_seq"] = np.zeros((1, 1, dense_seq), np.float32)
        if dense_sent:
            batch["dense_sent"] = np.zeros((1, dense_sent), np.float32)
        try:
            self._predict_batch(batch)
        except (KeyError, ValueError, IndexError):
            raise
        except Exception as error:  # ONNX Runtime's own error types, on an input width that does not fit
            raise ValueError(" ".join(str(error).split())[:300]) from None

    # --- heads ----------------------------------------------------------------------------
    def predict_batch(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Intent similarities [B, N]; per tag set, tags and confidences [B, T] (0 at padding)."""
        with single_blas_thread():
            return self._predict_batch(batch)

    def _predict_batch(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        lengths = batch["lengths"].astype(np.int64)
        max_len = int(batch["shape"][1])
        x, mask = self.encode_text(batch)
        h = self.transform(x, mask)  # [B, T+1, U]
        out: dict[str, np.ndarray] = {}
        if self.intents and self.label_embeddings is not None:
            sentence = h[np.arange(len(lengths)), lengths]  # [B, U]: the sentence position
            text = self._dense(names.TEXT_EMBED, sentence)  # [B, E]
            out["sentence"], out["text_embed"] = sentence, text  # the in-scope score's vectors
            labels = self.label_embeddings  # [N, E]
            if self.similarity_type == "cosine":
                text = text / np.sqrt(np.maximum((text**2).sum(-1, keepdims=True), 1e-12))
                labels = labels / np.sqrt(np.maximum((labels**2).sum(-1, keepdims=True), 1e-12))
            out["intent_sims"] = text @ labels.T  # [B, N]
        h_tokens = h[:, :max_len]  # [B, T, U]
        entity_tags: np.ndarray | None = None
        for kind, decoder in self.decoders.items():
            if kind == "entity" or entity_tags is None:
                logits = self._dense(names.tag_logits(kind), h_tokens)  # [B, T, K]
            else:
                one_hot = np.eye(len(self.decoders["entity"].start), dtype=np.float32)[entity_tags]
                tag_embedding = self._dense(names.ENTITY_TAG_EMBED, one_hot)  # [B, T, E]
                logits = self._dense(names.tag_logits(kind), np.concatenate([h_tokens, tag_embedding], -1))
            tags = np.zeros((len(lengths), max_len), np.int32)
            confidence = np.zeros((len(lengths), max_len), np.float32)
            for b, n in enumerate(lengths):
                n = max(int(n), 1)
                tags[b, :n], confidence[b, :n] = decoder.decode(logits[b, :n])
            if kind == "entity":
                entity_tags = tags
            out[f"tags_{kind}"], out[f"conf_{kind}"] = tags, confidence
        return out


def check_transformer(
    w: dict[str, np.ndarray], layers: list[names.TransformerLayer], heads: int, units: int,
    relative_rows: int,
) -> None:
    """ValueError unless the transformer's weights have the shapes of ``heads`` x ``units`` (U)
    and relative tables of at least ``relative_rows`` rows; the input width D and the
    feed-forward width F are what the weights say."""
    if heads < 1 or units % heads:
        raise ValueError(f"{units} transformer units do not split into {heads} attention heads")
    u = units
    embedding, output = names.TRANSFORMER_EMBEDDING, names.TRANSFORMER_OUTPUT_NORM
    tables = [w[n] for layer in layers for n in (layer.key_relative, layer.value_relative) if n in w]
    rows = max(relative_rows, tables[0].shape[1] if tables and tables[0].ndim == 3 else 0)
    shapes = {names.kernel(embedding): (np.shape(w[names.kernel(embedding)])[:1] or (-1,)) + (u,),
              names.bias(embedding): (u,), names.gamma(output): (u,), names.beta(output): (u,)}
    for layer in layers:
        f = (np.shape(w[names.kernel(layer.ffn_in)])[1:] or (-1,))[0]
        for norm in (layer.attention_norm, layer.ffn_norm):
            shapes[names.gamma(norm)] = shapes[names.beta(norm)] = (u,)
        for part in ("query", "key", "value", "output"):
            shapes[names.kernel(layer.attention(part))] = (u, u)
        shapes[names.bias(layer.attention("output"))] = (u,)
        shapes[layer.key_relative] = shapes[layer.value_relative] = (heads, rows, u // heads)
        shapes.update({names.kernel(layer.ffn_in): (u, f), names.bias(layer.ffn_in): (f,),
                       names.kernel(layer.ffn_out): (f, u), names.bias(layer.ffn_out): (u,)})
    for name, shape in shapes.items():
        if name in w and w[name].shape != shape:
            raise ValueError(f"'{name}' has shape {w[name].shape}, the network needs {shape}")


def _stack_depth(weights: dict[str, np.ndarray], stack: str) -> int:
    """How many dense layers an Ffnn stack has in ``weights`` (0 when absent)."""
    depth = 0
    while names.kernel(names.hidden(stack, depth)) in weights:
        depth += 1
    return depth
