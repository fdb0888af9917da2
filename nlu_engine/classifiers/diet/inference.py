"""DIET's prediction: the whole network one ONNX Runtime call, the tags decoded here.

The network (``DIETNetwork`` without dropout) is one ONNX graph (``onnx_graph.py``), written
when a model loads from the named weights ``DIETNetwork.export_weights`` produces (kernels with
their connection masks applied, named by ``weight_names``), so loading a model and parsing never
imports TensorFlow: a server starts fast and stays small. The ResponseSelector parses through
the same graph (its variant without a transformer, by default). Here a batch becomes the
graph's feeds, and its outputs become the parse's arrays::

    batch (csr entries, dense features, lengths) ─► token_mask, slot, feeds ─► ONNX graph
    ─► intent similarities [B, N], sentence and text vectors, tag logits [B, T, K]
    tags: logits ─► constrained Viterbi + forward-backward (NumPy) -> tags, confidences

The CRF's decoding (a decoding algorithm, not a network) stays NumPy; so does adding the decoded
entity tags' term to the role and group logits (a table row per tag, ``onnx_graph._tag_heads``).

Shapes: B batch, T tokens, N labels, K tags.
"""

from __future__ import annotations

import numpy as np

from nlu_engine.classifiers.diet import onnx_graph
from nlu_engine.classifiers.diet import weight_names as names
from nlu_engine.classifiers.diet.spec import NetworkParams
from nlu_engine.contract.threads import single_blas_thread
from nlu_engine.nn.onnx_runtime import Sessions
from nlu_engine.training_data.bilou import bilou_constraints

_FORBIDDEN = -1e4  # score of a transition / first / last tag BILOU forbids (as crf.py)
#: inputs up to this many positions run on a one-thread session, larger ones on all threads
SINGLE_THREAD_MAX_POSITIONS = 256
#: the dtype of each array a batch feeds the graph, by input name
_BATCH_INPUTS = {
    **{f"{kind}_{part}": dtype for kind in ("seq", "sent")
       for part, dtype in (("ids", np.int32), ("values", np.float32), ("positions", np.int32))},
    "dense_seq": np.float32, "dense_sent": np.float32,
}


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
    CRF tag sets ("entity", "role", "group") and ``bilou`` says whether BILOU constraints apply;
    ``dense_seq`` and ``dense_sent`` are the widths of the dense features the batches carry.
    """

    def __init__(
        self,
        weights: dict[str, np.ndarray],
        params: NetworkParams,
        label_features: np.ndarray,
        tag_vocabularies: dict[str, list[str]],
        bilou: bool,
        dense_seq: int = 0,
        dense_sent: int = 0,
    ) -> None:
        w = {k: np.asarray(v, np.float32) for k, v in weights.items()}
        self.params = params
        self.num_layers = params.number_of_transformer_layers
        units, heads = params.transformer_size, params.number_of_attention_heads
        max_relative = params.max_relative_position or 0
        layers = [names.TransformerLayer(i) for i in range(self.num_layers)]
        if self.num_layers:  # before ONNX Runtime sees them: it only checks shapes as it runs
            rows = max_relative + (0 if params.unidirectional_encoder else max_relative) + 1
            check_transformer(w, layers, heads, units, rows)
        self.intents = bool(
            params.intent_classification and label_features.shape[0] > 0
            and names.kernel(names.TEXT_EMBED) in w
        )
        shape = onnx_graph.Shape(heads=heads, units=units, max_relative=max_relative,
                                 unidirectional=params.unidirectional_encoder,
                                 similarity=params.similarity_type, tag_sets=tuple(tag_vocabularies),
                                 layers=self.num_layers)
        #: the network as one ONNX graph, and the role / group logits' entity-tag tables
        self.graph, self.tag_tables = onnx_graph.diet_graph(
            w, shape, onnx_graph.Inputs(dense_seq, dense_sent), label_features if self.intents else None
        )
        self._inputs = [i.name for i in self.graph.graph.input]
        #: the sparse tables, fed by reference every call (``onnx_graph._bag``)
        self._tables = {onnx_graph.table_input(layer): w[names.kernel(layer)]
                        for layer in names.SPARSE_LAYERS if onnx_graph.table_input(layer) in self._inputs}
        self._outputs = [o.name for o in self.graph.graph.output]
        self._sessions = Sessions(self.graph, SINGLE_THREAD_MAX_POSITIONS)
        self.decoders = {
            kind: CRFDecoder(w[names.transitions(kind)], bilou_constraints(v) if bilou else None)
            for kind, v in tag_vocabularies.items()
        }

    def feeds(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The graph's inputs for a batch (``batching.make_batch``'s arrays)."""
        size, max_len = (int(v) for v in batch["shape"])
        lengths = batch["lengths"].astype(np.int64)
        feeds = {"token_mask": (np.arange(max_len)[None, :] < lengths[:, None]).astype(np.float32)}
        slot = np.zeros((size, max_len + 1), np.float32)
        slot[np.arange(size), lengths] = 1.0  # the sentence position, right after the last token
        feeds["slot"] = slot
        feeds.update(self._tables)
        for name in self._inputs:
            if name in _BATCH_INPUTS:
                feeds[name] = np.asarray(batch[name], _BATCH_INPUTS[name])
        return feeds

    def run(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The graph's outputs by name for a batch: "intent_sims" [B, N], "sentence" [B, U],
        "text_embed" [B, E] (with an intent head), "logits_<tag set>" [B, T, K]."""
        size, max_len = (int(v) for v in batch["shape"])
        values = self._sessions.run_all(self.feeds(batch), size * (max_len + 1))
        return dict(zip(self._outputs, values, strict=True))

    def probe(self, seq_vocab: int, sent_vocab: int, dense_seq: int, dense_sent: int) -> None:
        """One message of one token through the network (a model loading checks its weights so):
        ValueError, IndexError or KeyError when the weights do not fit together or the
        vocabularies and dense widths."""
        batch: dict[str, np.ndarray] = {"shape": np.array([1, 1], np.int32), "lengths": np.ones(1, np.int32)}
        for kind, vocab in (("seq", seq_vocab), ("sent", sent_vocab)):
            ids = np.array([vocab - 1] if vocab > 0 else [], np.int32)  # the last row of the table
            batch[f"{kind}_ids"], batch[f"{kind}_values"] = ids, np.ones(len(ids), np.float32)
            batch[f"{kind}_positions"] = np.zeros(len(ids), np.int32)
        if dense_seq:
            batch["dense_seq"] = np.zeros((1, 1, dense_seq), np.float32)
        if dense_sent:
            batch["dense_sent"] = np.zeros((1, dense_sent), np.float32)
        try:
            self._predict_batch(batch)
        except (KeyError, ValueError, IndexError):
            raise
        except Exception as error:  # ONNX Runtime's own error types, on an input that does not fit
            raise ValueError(" ".join(str(error).split())[:300]) from None

    def predict_batch(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Intent similarities [B, N] and the in-scope score's vectors "sentence" and "text_embed";
        per tag set, tags and confidences [B, T] (0 at padding)."""
        with single_blas_thread():  # the decoders' small products
            return self._predict_batch(batch)

    def _predict_batch(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        lengths = batch["lengths"]
        graph = self.run(batch)
        out = {k: graph[k] for k in ("intent_sims", "sentence", "text_embed") if k in graph}
        entity_tags: np.ndarray | None = None
        for kind, decoder in self.decoders.items():
            logits = graph[f"logits_{kind}"]  # [B, T, K]
            if kind in self.tag_tables and entity_tags is not None:
                logits = logits + self.tag_tables[kind][entity_tags]  # the entity tags' term
            tags = np.zeros(logits.shape[:2], np.int32)
            confidence = np.zeros(logits.shape[:2], np.float32)
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
