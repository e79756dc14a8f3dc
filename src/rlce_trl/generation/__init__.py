"""Model running, the ground every other layer stands on: the transformers loader (`hf`), what a model's cache holds
(`caches`), cached KV decoding (`kv_decoding`) and the text and vision-language generators (`generators`) that
evaluation, sampling, the verifiers and training share."""
