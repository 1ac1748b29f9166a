"""Building the embedded draft and feature head from the target's own text (offline, on CPU).

    python -m specnb.training.train_draft   distils a small Llama draft into data/draft/
    python -m specnb.training.train_head    trains the feature head into data/head/
    python -m specnb.training.head_data     the target's answers and hidden states the head
                                            trains on, in resumable shards (`slots`: the
                                            continuous batching; `prompts`: user turns the
                                            target writes; `head_records`: what of them
                                            the repository keeps, and the rebuild from it)
    common                                  the warm-up/cosine learning rate and the
                                            training.json record both commands write

What does not go here: the head's and drafter's architecture (`specnb.drafters.head`,
`specnb.drafters.feature`: training imports them), loading models (`specnb.models`), and any
decoding loop (`specnb.methods`).
"""
