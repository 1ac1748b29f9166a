"""Getting models and prompts: the embedded target, (target, drafter) pairs, the shipped data.

    loading   the embedded SmolLM2 (fetched and dequantized once, then cached), any Hugging Face
              model, devices and dtypes, chat prompts as ids, a truncated stand-in draft
    pairs     `load_pair()`: a target, its drafter and the tokenizer; the embedded draft and head
    fast_path `cpu_path`: dense, transposed, oneDNN-prepacked or swapped float32 linears, "auto"
              measured per CPU
    machine   `machine_line()`: the CPU, threads, any GPU and the versions, on one line
    data      `DATA_DIR` (data/ in a checkout, specnb/_data in a wheel) and `load_prompts`

What does not go here: decoding (`specnb.methods`), training the embedded draft and head
(`specnb.training`), timing (`specnb.bench`).
"""
