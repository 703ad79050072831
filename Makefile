# Two commands on a fresh machine: `make demo` and `make test`.
# Both create (or update) the local virtual environment .venv when needed.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DATA ?= ../shared/data

.PHONY: demo demo-local test lint bench clean constraints fuzz

PIP_FLAGS := --quiet --disable-pip-version-check

# the install also compiles the kernels (the XML tokenizer, the XPush machine's core) when
# a C compiler is there; without one, Python does their work (xcep --version says which).
# The versions are those of constraints.txt, so that a new upstream release cannot turn
# a green main red.
$(STAMP): pyproject.toml setup.py constraints.txt src/xcep/events/_tokenizer.c src/xcep/xpush/_states.c src/xcep/xseq/_quiet.c src/xcep/xseq/_lists.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install $(PIP_FLAGS) --upgrade pip
	$(PY) -m pip install $(PIP_FLAGS) -c constraints.txt -e '.[dev,bench,spark,serve]'
	$(PY) -c 'from xcep.kernels import report_missing; report_missing()'
	# the bytecode, written once: an editable install writes none, and where
	# PYTHONDONTWRITEBYTECODE is set every `xcep` would compile its modules (~40 ms)
	$(PY) -m compileall -q src > /dev/null
	touch $(STAMP)

# constraints.txt again: the newest versions pyproject.toml's ranges allow, installed in a
# fresh environment and frozen. Then run make test before committing it.
constraints:
	rm -rf build/constraints-venv
	$(PYTHON) -m venv build/constraints-venv
	build/constraints-venv/bin/pip install $(PIP_FLAGS) --upgrade pip
	build/constraints-venv/bin/pip install $(PIP_FLAGS) -e '.[dev,bench,spark,serve,peers]'
	{ echo '# The exact versions make installs (pip install -c constraints.txt): tested by make test.'; \
	  echo '# Made by `make constraints` from the ranges in pyproject.toml; do not edit by hand.'; \
	  build/constraints-venv/bin/pip freeze --exclude-editable; } > constraints.txt
	rm -rf build/constraints-venv

# xcep's main job on Spark (local[2]): XMark people through subscriptions (XPush), and
# per-company runs of falling prices over a generated stock stream (XSeq, partition by).
demo: $(STAMP)
	$(PY) examples/spark_demo.py $(DATA) build/demo
	$(PY) examples/serve_demo.py $(DATA) build/serve-demo

# The same engines in-process, one command each.
demo-local: $(STAMP)
	$(VENV)/bin/xcep events --stats $(DATA)/xmark/xmark-f0.01.xml
	$(VENV)/bin/xcep filter --filters examples/xmark-subscriptions.txt $(DATA)/xmark/xmark-f0.01.xml
	$(VENV)/bin/xcep xseq @examples/xmark-falling-prices.xseq --selection maximal \
		$(DATA)/xmark/xmark-f0.01.xml | tail -5
	$(VENV)/bin/xcep xquery @examples/search-no-buy.xq examples/shop-events.xml
	$(VENV)/bin/xcep xscl --queries examples/xscl/queries.txt --timestamp @date \
		examples/xscl/stream.xml | cut -c1-120

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench examples
	$(VENV)/bin/ruff format --check src tests bench examples

test: lint
	$(PY) -m pytest

# The fuzzing campaign (tests/fuzz.py, docs/errors.md): bad documents in every format,
# hostile documents, mutated queries of every language, odd option values; it fails when
# a case ends in an internal error, a hang, or a lost good document. FUZZ_CASES=N to size.
FUZZ_CASES ?= 12000
FUZZ_SEED ?= 1
fuzz: $(STAMP)
	$(PY) -m tests.fuzz --cases $(FUZZ_CASES) --seed $(FUZZ_SEED) > build/fuzz-report.json || \
		{ cat build/fuzz-report.json; exit 1; }

bench: $(STAMP)
	$(PY) -m pip install $(PIP_FLAGS) -c constraints.txt -e '.[peers]'
	$(PY) -m compileall -q src > /dev/null  # (fresh processes are timed: no compiling in them)
	$(PY) -m bench events
	$(PY) -m bench formats
	$(PY) -m bench xpush
	$(PY) -m bench xpush-kernels
	$(PY) -m bench xpush-families
	$(PY) -m bench xseq
	$(PY) -m bench xseq-opt
	$(PY) -m bench xseq-multi
	$(PY) -m bench xseq-xpath
	$(PY) -m bench xquery
	$(PY) -m bench xscl
	$(PY) -m bench xscl-stream
	$(PY) -m bench spark
	$(PY) -m bench spark-scale
	$(PY) -m bench spark-10gb

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .ruff_cache
