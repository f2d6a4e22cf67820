# Everyday commands. `make test` is what CI runs.
.PHONY: fmt lint test bench demo loadtest

fmt:
	cargo fmt --all

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

test:
	bash scripts/test.sh

bench:
	cargo bench --bench envelope
	cargo bench --bench scripts

demo:
	bash scripts/quickstart.sh

loadtest:
	cargo run --release -p weir-loadtest -- drain --jobs 200000
