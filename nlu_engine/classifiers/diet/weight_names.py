"""The names of DIET's exported weights, shared by the TensorFlow export and the parse graph.

``DIETNetwork.export_weights`` (``model.py``) writes prediction's weights under these names and
``onnx_graph.py`` builds the parse graph from them; a stored model's ``weights.npz`` is keyed by
them. They are part of the archive format: renaming one needs a new ``WEIGHTS_FORMAT`` in
``storage.py``, or archives trained before would no longer load.

A layer name owns ``<layer>/kernel`` and, when it has one, ``<layer>/bias``; a LayerNorm's name
owns ``<norm>/gamma`` and ``<norm>/beta``. For example the first transformer block's query
kernel is ``transformer/layer_0/attention/query/kernel``.
"""

from __future__ import annotations

from dataclasses import dataclass

# --- input: sparse embedding bags, the layers that unify token and sentence widths ------------
SEQ_BAG = "seq_bag"  # sparse token features -> dense
SENT_BAG = "sent_bag"  # sparse sentence features -> dense
SPARSE_LAYERS = (SEQ_BAG, SENT_BAG)
SPARSE_TABLES = (f"{SEQ_BAG}/kernel", f"{SENT_BAG}/kernel")  # the vocabulary-sized tables
SEQ_UNIFY = "seq_unify"  # Ffnn stacks (see ``hidden``)
SENT_UNIFY = "sent_unify"
TEXT_HIDDEN = "text_hidden"
# --- transformer ---------------------------------------------------------------------------
TRANSFORMER_EMBEDDING = "transformer/embedding"
TRANSFORMER_OUTPUT_NORM = "transformer/output_norm"
# --- intent head -----------------------------------------------------------------------------
LABEL_DENSE = "label_dense"
LABEL_HIDDEN = "label_hidden"
TEXT_EMBED = "text_embed"
LABEL_EMBED = "label_embed"
# --- tag heads: role and group logits also read an embedding of the entity tags ---------------
ENTITY_TAG_EMBED = "entity_tag_embed"


def kernel(layer: str) -> str:
    return f"{layer}/kernel"


def bias(layer: str) -> str:
    return f"{layer}/bias"


def gamma(norm: str) -> str:
    return f"{norm}/gamma"


def beta(norm: str) -> str:
    return f"{norm}/beta"


def hidden(stack: str, index: int) -> str:
    """The ``index``-th dense layer of an Ffnn stack (``SEQ_UNIFY``, ``TEXT_HIDDEN``, ...)."""
    return f"{stack}/hidden_{index}"


def tag_logits(kind: str) -> str:
    """The dense layer giving a tag set's logits ("entity", "role" or "group")."""
    return f"{kind}_logits"


def transitions(kind: str) -> str:
    """A tag set's CRF transition matrix [K, K] (a weight name, not a layer)."""
    return f"{kind}_crf/transitions"


@dataclass(frozen=True)
class TransformerLayer:
    """The names in transformer block ``index`` (pre-LayerNorm attention, then feed-forward)."""

    index: int

    @property
    def prefix(self) -> str:
        return f"transformer/layer_{self.index}"

    @property
    def attention_norm(self) -> str:
        return f"{self.prefix}/attention_norm"

    def attention(self, part: str) -> str:
        """The projection ``part``: "query", "key", "value" (no bias) or "output"."""
        return f"{self.prefix}/attention/{part}"

    @property
    def key_relative(self) -> str:
        """The key relative-position table [H, Kr, d] (a weight name)."""
        return f"{self.prefix}/attention/key_relative_embeddings"

    @property
    def value_relative(self) -> str:
        """The value relative-position table [H, Kr, d] (a weight name)."""
        return f"{self.prefix}/attention/value_relative_embeddings"

    @property
    def ffn_norm(self) -> str:
        return f"{self.prefix}/ffn_norm"

    @property
    def ffn_in(self) -> str:
        return f"{self.prefix}/ffn_in"

    @property
    def ffn_out(self) -> str:
        return f"{self.prefix}/ffn_out"
