from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.dead_mode import DeadMode


T = TypeVar("T", bound="BeforeOpen")


@_attrs_define
class BeforeOpen:
    """The requests before the circuit opens, per dead mode.

    Attributes:
        refused (DeadMode): A dead endpoint of one kind, before the circuit opens.
        timing_out (DeadMode): A dead endpoint of one kind, before the circuit opens.
        server_error (DeadMode): A dead endpoint of one kind, before the circuit opens.
        at_most_requests (int): Requests before the opening if the channel's limit had grown to its ceiling while it was
            healthy (every slot in flight when the endpoint dies).
        initial_limit (int): The concurrency limit the figures start from (the initial one).
    """

    refused: DeadMode
    timing_out: DeadMode
    server_error: DeadMode
    at_most_requests: int
    initial_limit: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        refused = self.refused.to_dict()

        timing_out = self.timing_out.to_dict()

        server_error = self.server_error.to_dict()

        at_most_requests = self.at_most_requests

        initial_limit = self.initial_limit

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "refused": refused,
                "timing_out": timing_out,
                "server_error": server_error,
                "at_most_requests": at_most_requests,
                "initial_limit": initial_limit,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.dead_mode import DeadMode  # noqa: PLC0415

        d = dict(src_dict)
        refused = DeadMode.from_dict(d.pop("refused"))

        timing_out = DeadMode.from_dict(d.pop("timing_out"))

        server_error = DeadMode.from_dict(d.pop("server_error"))

        at_most_requests = d.pop("at_most_requests")

        initial_limit = d.pop("initial_limit")

        before_open = cls(
            refused=refused,
            timing_out=timing_out,
            server_error=server_error,
            at_most_requests=at_most_requests,
            initial_limit=initial_limit,
        )

        before_open.additional_properties = d
        return before_open

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
