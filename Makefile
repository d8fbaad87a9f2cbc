# jaco — the two commands on a fresh machine are `make up` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
NODE_MODULES_STAMP := node_modules/.package-lock.json

.PHONY: help build up down test test-unit test-integration test-e2e bench images system crds compat clean sim

help:
	@echo "make up       build, start a local 3-node cluster (.jaco/) and apply examples/hello.yaml"
	@echo "make down     stop the local cluster and its containers"
	@echo "make test     install what is missing, start etcd/dockerd as needed, run every test tier"
	@echo "make bench    run the benchmarks (figures in docs/benchmarks.md)"
	@echo "make sim      the deterministic simulation, long (SEEDS=100000)"

$(NODE_MODULES_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund

# The build's steps are package.json's "build" script (the validators, the bundle bin/jaco runs, the dashboard, the build info).
build: $(NODE_MODULES_STAMP)
	npm run --silent build

system:
	scripts/ensure-system.sh

images: system
	scripts/build-images.sh

# The demo images go to the cluster's registry: every node's engine starts empty, as a new host's.
DEMO_IMAGES := jaco-demo/busybox:1 jaco-demo/busybox:2 jaco-demo/postgres:15 jaco-demo/redis:7 jaco-demo/nginx:1
# What the nodes themselves run: the sandbox of cluster-network replicas (jaco agent --sandbox-image).
SYSTEM_IMAGES := jaco/pause:1

up: build images
	./bin/jaco up --nodes 3 --detach
	./bin/jaco registry push $(DEMO_IMAGES) $(SYSTEM_IMAGES)
	./bin/jaco apply -f examples/hello.yaml
	@echo
	@echo "Try: ./bin/jaco status hello && ./bin/jaco get nodes -o wide"
	@echo "     curl http://NODE-ADDRESS:18080/   # hello/site through any node's ingress (jaco up printed the addresses)"

down:
	@if [ -f dist/bundle/jaco.js ]; then ./bin/jaco down; else echo "nothing to stop (not built)"; fi

test: system $(NODE_MODULES_STAMP)
	scripts/test.sh

# The deterministic simulation, long: make sim SEEDS=100000 (make test runs 2,000 seeds). Its
# seeds are split over two files; two workers run them on both cores.
SEEDS ?= 20000
sim: $(NODE_MODULES_STAMP)
	SIM_SEEDS=$(SEEDS) VITEST_MAX_WORKERS=2 npx vitest run --project sim

test-unit: $(NODE_MODULES_STAMP)
	npx vitest run --project unit

test-integration: system build
	npx vitest run --project integration

test-e2e: images build
	npx vitest run --project 'e2e*'

bench: images build
	npx tsx test/bench/run.ts

crds:
	npm run gen:crds

compat: build
	scripts/compat.sh

clean:
	rm -rf dist
