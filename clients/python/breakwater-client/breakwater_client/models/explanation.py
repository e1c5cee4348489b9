from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.before_open import BeforeOpen
    from ..models.explained_settings import ExplainedSettings
    from ..models.until_dead import UntilDead
    from ..models.warning import Warning_
    from ..models.while_open import WhileOpen


T = TypeVar("T", bound="Explanation")


@_attrs_define
class Explanation:
    """The answer of `GET /api/v1/channels/{id}/circuit/explain`.

    Attributes:
        before_open (BeforeOpen): The requests before the circuit opens, per dead mode.
        while_open (WhileOpen): How the open circuit is probed.
        until_dead (UntilDead): The longest a delivery can wait before it is dead.
        warnings (list[Warning_]): The settings in force that fight each other (empty when none).
        settings (ExplainedSettings): The settings an [`Explanation`] is computed from.
    """

    before_open: BeforeOpen
    while_open: WhileOpen
    until_dead: UntilDead
    warnings: list[Warning_]
    settings: ExplainedSettings
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        before_open = self.before_open.to_dict()

        while_open = self.while_open.to_dict()

        until_dead = self.until_dead.to_dict()

        warnings = []
        for warnings_item_data in self.warnings:
            warnings_item = warnings_item_data.to_dict()
            warnings.append(warnings_item)

        settings = self.settings.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "before_open": before_open,
                "while_open": while_open,
                "until_dead": until_dead,
                "warnings": warnings,
                "settings": settings,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.before_open import BeforeOpen  # noqa: PLC0415
        from ..models.explained_settings import ExplainedSettings  # noqa: PLC0415
        from ..models.until_dead import UntilDead  # noqa: PLC0415
        from ..models.warning import Warning_  # noqa: PLC0415
        from ..models.while_open import WhileOpen  # noqa: PLC0415

        d = dict(src_dict)
        before_open = BeforeOpen.from_dict(d.pop("before_open"))

        while_open = WhileOpen.from_dict(d.pop("while_open"))

        until_dead = UntilDead.from_dict(d.pop("until_dead"))

        warnings = []
        _warnings = d.pop("warnings")
        for warnings_item_data in _warnings:
            warnings_item = Warning_.from_dict(warnings_item_data)

            warnings.append(warnings_item)

        settings = ExplainedSettings.from_dict(d.pop("settings"))

        explanation = cls(
            before_open=before_open,
            while_open=while_open,
            until_dead=until_dead,
            warnings=warnings,
            settings=settings,
        )

        explanation.additional_properties = d
        return explanation

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
