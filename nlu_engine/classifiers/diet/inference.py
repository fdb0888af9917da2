"""DIET's prediction: the whole network one ONNX Runtime call, the tags decoded here.

The network (``DIETNetwork`` without dropout) is one ONNX graph (``onnx_graph.py``), written
when a model loads from the named weights ``DIETNetwork.export_weights`` produces (kernels with
their connection masks applied, named by ``weight_names``), so loading a model and parsing never
imports TensorFlow: a server starts fast and stays small. The ResponseSelector parses through
the same graph (its variant without a transformer, by default). Here a batch becomes the
graph's feeds, and its outputs become the parse's arrays::

    batch (csr entries, dense features, lengths) ─► token_mask, slot, feeds ─► ONNX graph
    ─► intent similarities [B, N], sentence and text vectors, tag logits [B, T, K]
    tags: logits ─► constrained Viterbi + forward-backward (NumPy, ``crf_decode``) -> tags, confidences

The CRF's decoding (a decoding algorithm, not a network) stays NumPy, in ``crf_decode.py``, the
one decode training's monitors use too; so does adding the decoded entity tags' term to the
role and group logits (a table row per tag, ``onnx_graph._tag_heads``).

Shapes: B batch, T tokens, N labels, K tags.
"""

from __future__ import annotations

import numpy as np

from nlu_engine.classifiers.diet import onnx_graph
from nlu_engine.classifiers.diet import weight_names as names
from nlu_engine.classifiers.diet.crf_decode import CRFDecoder, decode_tag_sets
from nlu_engine.classifiers.diet.spec import NetworkParams
from nlu_engine.contract.threads import single_blas_thread
from nlu_engine.nn.onnx_runtime import Sessions
from nlu_engine.training_data.bilou import bilou_constraints

#: inputs up to this many positions run on a one-thread session, larger ones on all threads
SINGLE_THREAD_MAX_POSITIONS = 256
#: the dtype of each array a batch feeds the graph, by input name
_BATCH_INPUTS = {
    **{f"{kind}_{part}": dtype for kind in ("seq", "sent")
       for part, dtype in (("ids", np.int32), ("values", np.float32), ("positions", np.int32))},
    "dense_seq": np.float32, "dense_sent": np.float32,
}


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
        graph = self.run(batch)
        out = {k: graph[k] for k in ("intent_sims", "sentence", "text_embed") if k in graph}
        out.update(decode_tag_sets(graph, self.tag_tables, batch["lengths"], self.decoders))
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
