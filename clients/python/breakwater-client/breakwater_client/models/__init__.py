"""Contains all the data models used in inputs/outputs"""

from .accepted import Accepted
from .admin_channel_action_action import AdminChannelActionAction
from .admin_host_action_action import AdminHostActionAction
from .api_key import ApiKey
from .attempt import Attempt
from .attempt_outcome import AttemptOutcome
from .audit_record import AuditRecord
from .auth_input_type_0 import AuthInputType0
from .auth_input_type_0_type import AuthInputType0Type
from .auth_input_type_1 import AuthInputType1
from .auth_input_type_1_type import AuthInputType1Type
from .auth_input_type_2 import AuthInputType2
from .auth_input_type_2_type import AuthInputType2Type
from .auth_type_0 import AuthType0
from .auth_type_0_type import AuthType0Type
from .auth_type_1 import AuthType1
from .auth_type_1_type import AuthType1Type
from .auth_type_2 import AuthType2
from .auth_type_2_type import AuthType2Type
from .backoff_policy_type_0 import BackoffPolicyType0
from .backoff_policy_type_0_kind import BackoffPolicyType0Kind
from .backoff_policy_type_1 import BackoffPolicyType1
from .backoff_policy_type_1_kind import BackoffPolicyType1Kind
from .batch_accepted import BatchAccepted
from .batch_item import BatchItem
from .before_open import BeforeOpen
from .channel import Channel
from .channel_filter_type_0 import ChannelFilterType0
from .channel_headers import ChannelHeaders
from .channel_ordering import ChannelOrdering
from .channel_view import ChannelView
from .circuit_defaults import CircuitDefaults
from .circuit_state import CircuitState
from .circuit_view import CircuitView
from .concurrency_view import ConcurrencyView
from .create_channel import CreateChannel
from .create_channel_filter_type_0 import CreateChannelFilterType0
from .create_channel_headers_type_0 import CreateChannelHeadersType0
from .create_event_type import CreateEventType
from .create_key import CreateKey
from .create_tenant import CreateTenant
from .created_channel import CreatedChannel
from .created_key import CreatedKey
from .created_tenant import CreatedTenant
from .dead_mode import DeadMode
from .delivery import Delivery
from .delivery_status import DeliveryStatus
from .delivery_summary import DeliverySummary
from .delivery_view import DeliveryView
from .enqueue_batch import EnqueueBatch
from .enqueue_one import EnqueueOne
from .event_settings import EventSettings
from .event_settings_patch import EventSettingsPatch
from .event_type import EventType
from .event_type_view import EventTypeView
from .explained_settings import ExplainedSettings
from .explanation import Explanation
from .fanned_out import FannedOut
from .filter_test import FilterTest
from .filter_test_result import FilterTestResult
from .header_spec import HeaderSpec
from .header_view import HeaderView
from .health import Health
from .host_circuit import HostCircuit
from .host_circuit_state import HostCircuitState
from .message import Message
from .message_accepted import MessageAccepted
from .message_delivery import MessageDelivery
from .open_session import OpenSession
from .openapi_response_200 import OpenapiResponse200
from .opened_session import OpenedSession
from .operator_channel import OperatorChannel
from .operator_patch import OperatorPatch
from .page_api_key import PageApiKey
from .page_audit_record import PageAuditRecord
from .page_channel import PageChannel
from .page_delivery_summary import PageDeliverySummary
from .page_event_type import PageEventType
from .page_host_circuit import PageHostCircuit
from .page_operator_channel import PageOperatorChannel
from .page_tenant import PageTenant
from .patch_channel import PatchChannel
from .patch_channel_filter_type_0 import PatchChannelFilterType0
from .patch_channel_headers_type_0 import PatchChannelHeadersType0
from .patch_event_type import PatchEventType
from .patch_host import PatchHost
from .policy_in_force import PolicyInForce
from .policy_source import PolicySource
from .policy_sources import PolicySources
from .portal_session import PortalSession
from .problem import Problem
from .queue_stats import QueueStats
from .queues import Queues
from .quota import Quota
from .quota_patch import QuotaPatch
from .quotas import Quotas
from .recover_body import RecoverBody
from .recover_result import RecoverResult
from .replay_window import ReplayWindow
from .replayed import Replayed
from .retry_policy import RetryPolicy
from .rotate_secret import RotateSecret
from .rotated import Rotated
from .rotated_secret import RotatedSecret
from .scope import Scope
from .self_patch import SelfPatch
from .send_message import SendMessage
from .set_defaults import SetDefaults
from .subscriber import Subscriber
from .tenant import Tenant
from .tenant_quotas import TenantQuotas
from .tenant_view import TenantView
from .tier import Tier
from .until_dead import UntilDead
from .violation import Violation
from .warning import Warning_
from .while_open import WhileOpen

__all__ = (
    "Accepted",
    "AdminChannelActionAction",
    "AdminHostActionAction",
    "ApiKey",
    "Attempt",
    "AttemptOutcome",
    "AuditRecord",
    "AuthInputType0",
    "AuthInputType0Type",
    "AuthInputType1",
    "AuthInputType1Type",
    "AuthInputType2",
    "AuthInputType2Type",
    "AuthType0",
    "AuthType0Type",
    "AuthType1",
    "AuthType1Type",
    "AuthType2",
    "AuthType2Type",
    "BackoffPolicyType0",
    "BackoffPolicyType0Kind",
    "BackoffPolicyType1",
    "BackoffPolicyType1Kind",
    "BatchAccepted",
    "BatchItem",
    "BeforeOpen",
    "Channel",
    "ChannelFilterType0",
    "ChannelHeaders",
    "ChannelOrdering",
    "ChannelView",
    "CircuitDefaults",
    "CircuitState",
    "CircuitView",
    "ConcurrencyView",
    "CreateChannel",
    "CreateChannelFilterType0",
    "CreateChannelHeadersType0",
    "CreatedChannel",
    "CreatedKey",
    "CreatedTenant",
    "CreateEventType",
    "CreateKey",
    "CreateTenant",
    "DeadMode",
    "Delivery",
    "DeliveryStatus",
    "DeliverySummary",
    "DeliveryView",
    "EnqueueBatch",
    "EnqueueOne",
    "EventSettings",
    "EventSettingsPatch",
    "EventType",
    "EventTypeView",
    "ExplainedSettings",
    "Explanation",
    "FannedOut",
    "FilterTest",
    "FilterTestResult",
    "HeaderSpec",
    "HeaderView",
    "Health",
    "HostCircuit",
    "HostCircuitState",
    "Message",
    "MessageAccepted",
    "MessageDelivery",
    "OpenapiResponse200",
    "OpenedSession",
    "OpenSession",
    "OperatorChannel",
    "OperatorPatch",
    "PageApiKey",
    "PageAuditRecord",
    "PageChannel",
    "PageDeliverySummary",
    "PageEventType",
    "PageHostCircuit",
    "PageOperatorChannel",
    "PageTenant",
    "PatchChannel",
    "PatchChannelFilterType0",
    "PatchChannelHeadersType0",
    "PatchEventType",
    "PatchHost",
    "PolicyInForce",
    "PolicySource",
    "PolicySources",
    "PortalSession",
    "Problem",
    "Queues",
    "QueueStats",
    "Quota",
    "QuotaPatch",
    "Quotas",
    "RecoverBody",
    "RecoverResult",
    "Replayed",
    "ReplayWindow",
    "RetryPolicy",
    "Rotated",
    "RotatedSecret",
    "RotateSecret",
    "Scope",
    "SelfPatch",
    "SendMessage",
    "SetDefaults",
    "Subscriber",
    "Tenant",
    "TenantQuotas",
    "TenantView",
    "Tier",
    "UntilDead",
    "Violation",
    "Warning_",
    "WhileOpen",
)
