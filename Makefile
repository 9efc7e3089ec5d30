# Every target bootstraps .venv when it is missing (Python 3.11 and pip are all it needs).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# The offline MNIST fixture the tests and stored outputs use (8,000 train / 2,000 test real digits).
MNIST_SOURCE ?= ../shared/data/mnist
FIXTURE := .cache/course-data
export PIP_DISABLE_PIP_VERSION_CHECK := 1
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: hub-proxy help lab instructor progress test release solutions grade report bench bench-class fixture clean

help:
	@echo "make lab        open JupyterLab on the course (learners start here)"
	@echo "make progress   which exercises of every lesson pass, fail or wait for you, with points"
	@echo "make instructor open JupyterLab with nbgrader's Formgrader on the course (instructors)"
	@echo "make test       run the whole test suite offline"
	@echo "make solutions  rebuild and execute solutions/*/*.ipynb from their .pct.py sources [LESSONS=...]"
	@echo "make release    regenerate notebooks/ from solutions/ with nbgrader [LESSONS=...]"
	@echo "make grade      autograde every submission in grading/submitted, in parallel [ASSIGNMENT=... JOBS=N]"
	@echo "make report     class report after grading: grading/report/report.html, PNG figures, scores.csv"
	@echo "make bench      time and measure every solution notebook and one autograde"
	@echo "make soak       run lesson 08's distributed cells 20 times in a row: failures, hangs, time per launch [RUNS=N]"
	@echo "make bench-class  learners per minute grading a synthetic class, serial vs parallel [JOBS=N]"
	@echo "make hub-proxy  install JupyterHub's proxy (configurable-http-proxy, pinned) into hub/node_modules (docs/hub-runbook.md)"

$(BIN)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), f"Python 3.11 is required, found {sys.version.split()[0]}"'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test,grading,hub]"
	touch $@

$(FIXTURE)/MNIST/raw/t10k-labels-idx1-ubyte: | $(BIN)/.installed
	$(BIN)/python -m helpers.data build-offline --source $(MNIST_SOURCE) --dest $(FIXTURE)

fixture: $(FIXTURE)/MNIST/raw/t10k-labels-idx1-ubyte

# Jupyter refuses to run as root unless told to (containers often run as root).
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)

# Each mode adds its Jupyter config folder (jupyter-config/<mode>: JupyterLab's page_config.json and
# the server extensions to load) in front of the usual ones. Learners get Validate and none of
# nbgrader's instructor tools; neither mode asks about Jupyter news. binder/start uses the learner one.
lab_config = JUPYTER_CONFIG_PATH=$(abspath jupyter-config/$(1))$(if $(JUPYTER_CONFIG_PATH),:$(JUPYTER_CONFIG_PATH))

lab: $(BIN)/.installed
	$(call lab_config,learner) $(BIN)/jupyter lab --notebook-dir=. $(LAB_ARGS) notebooks/00_start_here/00_start_here.ipynb

# The Formgrader is under Nbgrader > Formgrader (or at /formgrader).
instructor: $(BIN)/.installed
	$(call lab_config,instructor) $(BIN)/jupyter lab --notebook-dir=. $(LAB_ARGS)

progress: $(BIN)/.installed
	$(BIN)/python -m helpers.progress $(LESSONS)

test: $(BIN)/.installed fixture
	COURSE_DATA=$(abspath $(FIXTURE)) $(BIN)/python -m pytest tests solutions --nbval --nbval-current-env

solutions: $(BIN)/.installed fixture
	COURSE_DATA=$(abspath $(FIXTURE)) $(BIN)/python -m coursetools.authoring build $(LESSONS)

release: $(BIN)/.installed
	$(BIN)/python -m coursetools.grading release $(LESSONS)

# JOBS: grading processes (default: one per core).
grade: $(BIN)/.installed
	$(BIN)/python -m coursetools.classroom grade $(ASSIGNMENT) $(if $(JOBS),--jobs $(JOBS)) $(ARGS)

report: $(BIN)/.installed
	$(BIN)/python -m coursetools.classroom report $(ASSIGNMENT) $(ARGS)

bench: $(BIN)/.installed fixture
	COURSE_DATA=$(abspath $(FIXTURE)) $(BIN)/python -m coursetools.bench

# Lesson 08's process launches, RUNS times in a row in one kernel: failures, hangs, seconds per launch, peak memory.
.PHONY: soak
soak: $(BIN)/.installed fixture
	COURSE_DATA=$(abspath $(FIXTURE)) $(BIN)/python -m tests.soak_distributed --runs $(or $(RUNS),20)

bench-class: $(BIN)/.installed fixture
	COURSE_DATA=$(abspath $(FIXTURE)) $(BIN)/python -m coursetools.bench --class $(if $(JOBS),--jobs $(JOBS)) $(ARGS)

clean:
	rm -rf grading .cache .pytest_cache

# JupyterHub's proxy for hub/jupyterhub_config.py, at the version hub/package-lock.json pins (needs node >= 18 and npm).
HUB_PROXY := hub/node_modules/.bin/configurable-http-proxy
hub-proxy: $(HUB_PROXY)

$(HUB_PROXY): hub/package.json hub/package-lock.json
	cd hub && npm ci --no-audit --no-fund --loglevel=error
	touch $@
