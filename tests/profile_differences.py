"""How a model profile differs from kip595, read from the profile's definition alone (its options,
its pins), named as the deviation report names them: what a test expects the report to find."""

from model.config import PINS, PROFILES, Options


def differences(profile: str) -> set[str]:
    kip, other = Options(), PROFILES[profile]
    options = {f"option {field}={getattr(other, field)}" for field in Options.__struct_fields__ if getattr(other, field) != getattr(kip, field)}
    return options | {f"{point}={pin.alternative}" for point, pin in PINS[profile].items()}
