"""xcep benchmarks: `python -m bench NAME` (or `make bench`). See bench/README.md."""
