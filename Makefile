# Everyday commands. `make test` is what CI runs.
.PHONY: fmt lint test bench demo loadtest loadtest-chart scenarios soak model

fmt:
	cargo fmt --all

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" cargo doc --no-deps

test:
	bash scripts/test.sh

bench:
	cargo bench --bench envelope
	cargo bench --bench scripts
	cargo bench --bench limiter

demo:
	bash scripts/quickstart.sh

loadtest:
	cargo run --release -p weir-loadtest -- drain --jobs 200000

# The adaptive limiter's scenario suite (docs/limiter.md), about four minutes; charts in
# reports/scenarios/NAME/. ONLY=capacity-steps,cold-start runs some.
scenarios:
	cargo run --release -p weir-loadtest -- scenarios --quiet --out reports/scenarios $(if $(ONLY),--only $(ONLY))

# Regenerates the chart in docs/ from a real downstream run (about a minute).
loadtest-chart:
	cargo run --release -p weir-loadtest -- downstream --out reports/downstream
	cp reports/downstream/throughput.png docs/downstream-throughput.png

# The mixed soak (adaptive per-key consumers, 429s and 500s, kill -9s, limit changes), 20,000 jobs.
soak:
	bash scripts/soak.sh

# The randomized model of the queue, long: as many cases as WEIR_MODEL_CASES says.
model:
	WEIR_MODEL_CASES=$${WEIR_MODEL_CASES:-5000} cargo test --release --test model
