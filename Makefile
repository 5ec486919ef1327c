# The two commands: `make run` (the node on the embedded default scene) and
# `make test` (the whole suite). Both bootstrap whatever is missing first.
SHELL := /bin/bash
ENV := . tools/env.sh &&
PYTEST_ARGS ?=
# `make run` serves the web page here (the node logs the address; WEB_PORT=0: no page)
WEB_PORT ?= 8080

.PHONY: run test bench bootstrap clean

bootstrap:
	@tools/bootstrap.sh

run: bootstrap
	@$(ENV) exec install/metasim_ros/lib/metasim_ros/sim_node --ros-args -p web_port:=$(WEB_PORT) -- $(ARGS)

test: bootstrap
	@$(ENV) tools/run_tests.sh $(PYTEST_ARGS)

bench: bootstrap
	@$(ENV) for b in bench/bench_*.py; do [ -e "$$b" ] || continue; echo "== $$b"; python "$$b" || exit 1; done

clean:
	rm -rf build install log .venv
