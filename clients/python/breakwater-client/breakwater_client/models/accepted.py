from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Accepted")


@_attrs_define
class Accepted:
    """Response of an accepted delivery.

    Attributes:
        id (UUID): The delivery id (also its `webhook-id`).
        status (str): `pending` (or `paused` behind an open circuit) when new; the earlier delivery's status on
            an idempotent replay.
        idempotent_replay (bool): True when the `Idempotency-Key` matched an earlier delivery, whose id this is.
    """

    id: UUID
    status: str
    idempotent_replay: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        status = self.status

        idempotent_replay = self.idempotent_replay

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "status": status,
                "idempotent_replay": idempotent_replay,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = UUID(d.pop("id"))

        status = d.pop("status")

        idempotent_replay = d.pop("idempotent_replay")

        accepted = cls(
            id=id,
            status=status,
            idempotent_replay=idempotent_replay,
        )

        accepted.additional_properties = d
        return accepted

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
