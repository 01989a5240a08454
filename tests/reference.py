"""The paper's reference files (BIG-Bench Mistake, Apache-2.0), pinned by SHA-256.

The fidelity tests compare the project against the paper's files. Beside the project, in the
founders' workspace, those live in `../shared/bbm`; a user's clone has no such folder. So the
checksums of the paper's files are recorded here: where `../shared/bbm` exists the tests check
it against them, and everywhere the shipped copies are checked against them, so that a clone
can use its shipped copies as the reference and every fidelity test runs.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Path inside ../shared/bbm -> SHA-256 of the paper's bytes (recorded from ../shared/bbm).
REFERENCE_SHA256 = {
    "LICENSE": "c71d239df91726fc519c6eb72d318ec65820627232b2f796219e87dcf35d0ab4",
    "annotation_guidelines/logical_deduction.txt":
        "81a9807284832bf49018b7dd93d5a47a57c67b4778023d1b77762b6e1a999a59",
    "annotation_guidelines/multistep_arithmetic.txt":
        "34ee2d12ae9ad1d14cd84389bcf4671ab61001360d2f479e9e8fafa732b78234",
    "annotation_guidelines/tracking_shuffled_objects.txt":
        "4c697b6f13b270ade86cefe9432a9aca3acd8ff0da571de02dafe07036799b01",
    "annotation_guidelines/word_sorting.txt":
        "754406789e7f7287162b86b7eafadc2c1fc1e17a2b8e61656b64135a7f29ef75",
    "data/dyck_languages.jsonl":
        "38cf1f524d119ce8d12c21d933ed8aa8d82bb5a36c4f6e71ed499ede234512f4",
    "data/logical_deduction.jsonl":
        "f521efec7c975558ac6a35e8d66a84bc17ff696865c622bc93604307bc63f0cd",
    "data/multistep_arithmetic.jsonl":
        "b3f9a99e62bdcb758d6cafc531a43f6d6bca6812190cce4f982d1c01ac0767d3",
    "data/tracking_shuffled_objects.jsonl":
        "637282d5721b76fb5a1d3b1eedef0b476b2a6634bd91f281ca69b782a670bd42",
    "data/word_sorting.jsonl":
        "e9deb2c57f7fc87f2d10336bc350c93c599bd3f483e3fb0ffb54854257ef8159",
    "generation_prompts/dyck_languages_prompt.txt":
        "09b2e416f0b4886760db27a36f2c9ed352355429c18d0179881dfb3130dead55",
    "generation_prompts/logical_deduction_prompt.txt":
        "4a508695b409c958aba3c51c2ed547bf63ab60378487d1f88972e6d605896701",
    "generation_prompts/multistep_arithmetic_prompt.txt":
        "ccd7fd5684639af32266d44126e20341fc84a60f974f70582205eb92fe90f856",
    "generation_prompts/tracking_shuffled_objects_prompt.txt":
        "bfdd7cf701357528b659ea7e295d03af7099d76092a7cfe9074e42b4371ed4a9",
    "generation_prompts/word_sorting_prompt.txt":
        "e9ce032e994bcf76d17bfd9797b32e678dfc3801fb6f3901520ad247cfeab006",
    "mistake_finding_prompts.json":
        "ac6b7268f9035c82f96e3b38fe7d498daf93d014b5d6eb4316c9397de0c0b08f",
    "paper_tables.json": "a464790ae9e08b5ad787d1528f5f77a87055739e2c86211f16e6be95c270608d",
}


def shipped_copies(reference_path: str) -> list[Path]:
    """Where the project ships a reference file (the licence ships twice)."""
    top, _, rest = reference_path.partition("/")
    if reference_path == "LICENSE":
        return [ROOT / "prompts" / "LICENSE", ROOT / "dataset" / "LICENSE"]
    if top == "data":
        return [ROOT / "dataset" / rest]
    return [ROOT / "prompts" / reference_path]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def mismatches_in_shipped() -> list[str]:
    """Shipped copies whose bytes are not the paper's, as "path: why" lines."""
    problems = []
    for reference_path, expected in REFERENCE_SHA256.items():
        for copy in shipped_copies(reference_path):
            if not copy.is_file():
                problems.append(f"{copy}: missing")
            elif sha256(copy) != expected:
                problems.append(f"{copy}: SHA-256 differs from the paper's {reference_path}")
    return problems


def build_reference_tree(folder: Path) -> Path:
    """A folder laid out like ../shared/bbm, made of links to the shipped copies (call only
    after mismatches_in_shipped() came back empty)."""
    for reference_path in REFERENCE_SHA256:
        link = folder / reference_path
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(shipped_copies(reference_path)[0])
    return folder
